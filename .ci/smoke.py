"""CI's run smoke, against the app that `make run` started (see .ci/run).

    .venv/bin/python .ci/smoke.py api  URL   # the model loads; one greedy token of the lesson's prompt is " Paris"
    .venv/bin/python .ci/smoke.py page URL   # the page loads in headless Chromium and shows the lab and the model

Each check prints what it saw and exits 1 with the reason when it fails.
"""

from __future__ import annotations

import shutil
import sys
import time

PROMPT = "The capital of France is"
EXPECTED = " Paris"
LOAD_TIMEOUT_S = 600  # the first start dequantises the embedded GGUF (~15 s on 2 cores; much longer on a busy one)


def fail(message: str) -> None:
    print(f"smoke: {message}", file=sys.stderr)
    sys.exit(1)


def check_api(url: str) -> None:
    from gradio_client import Client

    client = Client(url, verbose=False)
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while True:  # the page serves at once; the model loads in the background
        status = client.predict(api_name="/model_info")["status"]
        if status["ready"]:
            break
        if status["error"]:
            fail(f"the model failed to load: {status['error']}")
        if time.monotonic() > deadline:
            fail(f"the model was not ready within {LOAD_TIMEOUT_S} s ({status['message']})")
        time.sleep(2)
    # prompt, temperature, top_k, top_p, min_p, seed, order, max_new_tokens: one greedy token
    records = list(client.submit(PROMPT, 0.0, 0, 1.0, 0.0, None, "hf", 1, api_name="/stream_records"))
    if not records:
        fail("/stream_records returned no record")
    piece = records[-1]["piece"]
    print(f"smoke: {PROMPT!r} -> {piece!r} (greedy, one token)")
    if piece != EXPECTED:
        fail(f"expected {EXPECTED!r}, got {piece!r}")


def check_page(url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    chromium = shutil.which("chromium") or fail("chromium is not on PATH")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-dev-shm-usage"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=flags)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url, wait_until="domcontentloaded")
        expect(page.locator("#model-status")).to_contain_text("Model:", timeout=60_000)
        expect(page.get_by_role("button", name="Generate").first).to_be_visible(timeout=60_000)
        title = page.title()
        status = page.locator("#model-status").inner_text().strip().splitlines()[0]
        browser.close()
    if errors:
        fail(f"the page raised {len(errors)} script error(s): {errors[0]}")
    print(f"smoke: the page loaded in Chromium ({title!r}; {status})")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("api", "page"):
        fail("usage: smoke.py api|page URL")
    {"api": check_api, "page": check_page}[sys.argv[1]](sys.argv[2])
