"""Child process of the kill-and-resume test: ``momoka index CORPUS --store STORE`` with a counting embedder.

Usage: python _resume_child.py STORE CORPUS COUNTS [KILL_SAVE STAGE]

It does what the CLI does (build a new store, or open an existing one and add
the documents it lacks, skipping identical ones), committing every 10
documents, with a hash embedder that appends the number of texts of every
call to COUNTS and sleeps a little (so a kill lands anywhere). With KILL_SAVE
N and STAGE it SIGKILLs itself inside its N-th save: ``files`` (generation
files half written), ``renamed`` (generation renamed, manifest not yet
replaced) or ``manifest`` (new manifest written to its temporary file).
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import HashEmbedder

import momoka.store.store as store_mod
import momoka.store.writer as writer_mod
from momoka import Index


class CountingEmbedder(HashEmbedder):
    """The hash embedder, writing how many texts it embeds to a file as it goes."""

    def __init__(self, counts: str):
        super().__init__()
        self.counts = counts

    def embed(self, texts):
        time.sleep(0.05)
        out = super().embed(texts)
        with open(self.counts, "a") as f:
            f.write(f"{len(texts)}\n")
        return out


def _arm(n: int, stage: str) -> None:
    saves = {"n": 0}
    real_save, real_write, real_rename = writer_mod.StoreWriter._save, store_mod.write_file, os.rename

    def save(self, *a, **k):
        saves["n"] += 1
        return real_save(self, *a, **k)

    def write_file(path, data):
        real_write(path, data)
        if saves["n"] == n and ((stage == "files" and path.name == "documents.jsonl")
                                or (stage == "manifest" and path.name.startswith("manifest.json.tmp"))):
            os.kill(os.getpid(), signal.SIGKILL)

    def rename(src, dst):
        real_rename(src, dst)
        if saves["n"] == n and stage == "renamed" and os.path.basename(dst).startswith("gen-"):
            os.kill(os.getpid(), signal.SIGKILL)

    writer_mod.StoreWriter._save, os.rename = save, rename
    store_mod.write_file = writer_mod.write_file = write_file  # documents (read side) and manifests (writer)


def main() -> None:
    store, corpus, counts = sys.argv[1], sys.argv[2], sys.argv[3]
    if len(sys.argv) > 5:
        _arm(int(sys.argv[4]), sys.argv[5])
    emb = CountingEmbedder(counts)
    print("ready", flush=True)
    if os.path.exists(os.path.join(store, "manifest.json")):
        ix = Index.open(store, embedder=emb, writable=True)
        ix.writer.commit_docs = 10
        ix.add([corpus], existing="skip", commit=True, progress=False)
    else:
        ix = Index.build([corpus], store=store, embedder=emb, chunker="paragraph", commit_docs=10, progress=False)
    ix.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
