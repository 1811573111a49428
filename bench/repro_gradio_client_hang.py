"""Reproduction, for gradio_client's maintainers, of why script learners hung in a full room (gradio_client 2.7.2,
gradio 6.31): iterating a Job never ends when the job failed before its first status message.

Client.submit() runs the POST to /queue/join in a thread. If that POST fails (here the server is gone; in a full
room it was httpx's default 5 s timeout, hit when the join took longer), the job's future holds the error, but
the communicator's status stays STARTING. Job.__next__ only stops on Status.FINISHED, so `for x in job` spins
forever: no output, no error, no end. job.result() raises the error at once, and job.status() says FINISHED.

    .venv/bin/python bench/repro_gradio_client_hang.py

prints the first run's outputs ([0, 1, 2]), then the failed job's state and "iteration still running after
10 s: True". The playground's docs/api.md gives the workaround (a longer timeout, and a loop on job.done()).
"""

import subprocess
import sys
import threading
import time

from gradio_client import Client

PORT = 7899
APP = f"""
import time
from typing import Generator
import gradio as gr

def count(n: int) -> Generator[int, None, None]:
    for i in range(int(n)):
        time.sleep(0.1)
        yield i

with gr.Blocks() as demo:
    gr.api(count, api_name="count")
demo.queue().launch(server_port={PORT})
"""


def main() -> int:
    server = subprocess.Popen([sys.executable, "-c", APP], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                client = Client(f"http://127.0.0.1:{PORT}/", verbose=False)
                break
            except Exception:  # noqa: BLE001 (not up yet)
                time.sleep(0.5)
        else:
            print("the app did not start")
            return 2
        print("a job that works:", list(client.submit(3, api_name="/count")))
    finally:
        server.kill()
        server.wait()
    job = client.submit(3, api_name="/count")  # the POST to /queue/join fails: nobody listens
    time.sleep(1)
    print("the failed job's future:", job.future, "| job.status():", job.status().code,
          "| the communicator's status:", job.communicator.job.latest_status.code)
    outputs: list = []
    iterating = threading.Thread(target=lambda: outputs.extend(job), daemon=True)
    iterating.start()
    iterating.join(10)
    print("iteration still running after 10 s:", iterating.is_alive())
    return 1 if iterating.is_alive() else 0


if __name__ == "__main__":
    sys.exit(main())
