"""Enqueue a job on a Surety queue over HTTP, then wait for its result (standard library only).

    SURETY_URL=http://127.0.0.1:4000 SURETY_TOKEN=... python3 enqueue.py
"""
import json
import os
import urllib.error
import urllib.parse
import urllib.request

BASE = os.environ.get("SURETY_URL", "http://127.0.0.1:4000")
TOKEN = os.environ["SURETY_TOKEN"]
QUEUE = urllib.parse.quote(os.environ.get("SURETY_QUEUE", "thumbnails"), safe="")


def call(method, path, body=None):
    """Returns (HTTP status, parsed JSON answer); error answers are { "error": { code, message } }."""
    request = urllib.request.Request(
        BASE + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


# An id derived from the work itself makes the POST safe to retry: the same id is the same job.
job = {"data": {"image": "cat.png", "width": 200}, "options": {"id": "thumbnail:cat.png:200", "maxAttempts": 5}}
status, added = call("POST", f"/api/queues/{QUEUE}/jobs", job)
if status not in (200, 201):
    raise SystemExit(f"refused ({status}): {added['error']['code']}: {added['error']['message']}")
print(f"added {added['id']} ({added['state']})")

# A retry after a timeout or a lost answer adds nothing: 200 and the existing job.
status, again = call("POST", f"/api/queues/{QUEUE}/jobs", job)
print(f"sent again: {status}, same job {again['id']}, isNew={again['isNew']}")

# Each GET waits up to 30 s for the job to finish, then answers its state anyway: ask again until done.
job_path = f"/api/queues/{QUEUE}/jobs/{urllib.parse.quote(added['id'], safe='')}?waitMs=30000"
while True:
    status, info = call("GET", job_path)
    if status != 200:
        raise SystemExit(f"cannot read the job ({status}): {info['error']['message']}")
    if info["state"] in ("completed", "dead"):
        break
if info["state"] == "completed":
    print("completed:", json.dumps(info["result"]))
else:
    print("dead:", info["errors"][-1]["message"])
