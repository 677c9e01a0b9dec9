"""A language server that hangs, for the tests: it speaks the protocol's framing on stdio
(standard library only), answers ``initialize`` (unless started with ``--at-start``), then
reads every message and never answers or publishes anything again."""

import json
import sys


def messages(stream):
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is not None:
            yield json.loads(stream.read(length))


def send(message):
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    sys.stdout.buffer.flush()


def main():
    at_start = "--at-start" in sys.argv
    for message in messages(sys.stdin.buffer):
        if message.get("method") == "initialize" and not at_start:
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {
                "textDocumentSync": 1, "workspaceSymbolProvider": True,
                "definitionProvider": True}}})


if __name__ == "__main__":
    main()
