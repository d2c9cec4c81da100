"""Child process of the kill-during-replace test: replace every document of STORE with version VERSION.

Usage: python _replace_child.py STORE N VERSION

Opens the store, then ``Index.add`` of documents ``d0 .. d{N-1}`` whose text names VERSION, with
``existing="replace"``, committing after every document, through a hash embedder that sleeps a little
(so a kill lands anywhere: in a batch, an apply, a commit or a merge). Prints "ready" once the store is open.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import HashEmbedder

from momoka import Index


class SlowEmbedder(HashEmbedder):
    def embed(self, texts):
        time.sleep(0.03)
        return super().embed(texts)


def text(i: int, version: int) -> str:
    return f"Document d{i} at version v{version}. It tells of comet{i}.\n\nA second paragraph of v{version}."


if __name__ == "__main__":
    store, n, version = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ix = Index.open(store, embedder=SlowEmbedder(), writable=True)
    ix.writer.commit_docs = 1
    print("ready", flush=True)
    ix.add([{"doc_id": f"d{i}", "text": text(i, version)} for i in range(n)], existing="replace", commit=True, progress=False)
    ix.close()
    print("done", flush=True)
