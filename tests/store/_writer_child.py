"""Child process of the crash tests: a writer that adds, deletes and saves in a loop.

Usage: python _writer_child.py STORE START COUNT [hold|slowmerge]
With ``hold`` it only opens the store for writing, prints "locked" and sleeps. With ``slowmerge`` each
background merge writes "merging" to stderr when it starts writing and takes 50 ms longer there.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import HashEmbedder
from momoka import Index


def doc(i: int) -> dict:
    return {"doc_id": f"d{i}", "text": f"Document number {i} talks about topic{i % 7} and item{i}.\n\n"
            + " ".join(f"word{(i * j) % 97}" for j in range(60))}


def main() -> None:
    store, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ix = Index.open(store, embedder=HashEmbedder(), writable=True)
    if len(sys.argv) > 4 and sys.argv[4] == "hold":
        print("locked", flush=True)
        time.sleep(60)
        return
    if len(sys.argv) > 4 and sys.argv[4] == "slowmerge":
        from momoka.store import _merger

        def slow(job):
            sys.stderr.write("merging\n")
            sys.stderr.flush()
            time.sleep(0.05)

        _merger.before_write = slow
    print("ready", flush=True)
    for i in range(start, start + count):
        ix.add([doc(i)])
        if i % 3 == 2:
            ix.delete([f"d{i - 1}"])
        ix.save()
        print(i, flush=True)


if __name__ == "__main__":
    main()
