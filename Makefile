# The two commands of the README.
.PHONY: run test bench serve

run:  ## set up, then start the app on the embedded model (http://127.0.0.1:7860)
	./scripts/setup.sh
	.venv/bin/python app.py $(ARGS)

test:  ## set up (with test tools and Chromium), then run the whole test suite (a summary even if pytest dies)
	./scripts/setup.sh --dev
	.venv/bin/python scripts/run_tests.py -q $(ARGS)

bench:  ## the benchmarks (not timed tests: they print ratios measured in one run)
	./scripts/setup.sh --dev
	.venv/bin/python bench/bench_service.py

serve:  ## the model service on a local Ray Serve (requirements-scale.txt) and the page in front of it (docs/scaling.md)
	./scripts/serve.sh $(ARGS)
