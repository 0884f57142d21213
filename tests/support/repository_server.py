"""A web server on 127.0.0.1 for the bundle repository tests (Python's http.server).

Usage: python3 repository_server.py FOLDER
Serves FOLDER on a free port and prints "port N" once it listens. Three path
prefixes misbehave on purpose, each in front of an ordinary path of FOLDER:
  /truncated/...      archives (*.mpbundle) announce their full length, send
                      half of it, then close the connection; other files as usual
  /redirect-file/...  every answer is a redirect to file:///etc/passwd
  /status-500/...     every answer is HTTP 500
It ends on SIGTERM (the tests send it) and never runs for more than 120 s.
"""
import functools
import http.server
import os
import signal
import sys
import threading


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/redirect-file/"):
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/status-500/"):
            self.send_error(500)
            return
        if self.path.startswith("/truncated/"):
            self.path = self.path[len("/truncated"):]
            if self.path.endswith(".mpbundle"):
                with open(self.translate_path(self.path), "rb") as archive:
                    data = archive.read()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
        super().do_GET()


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that stops reading (memplan refusing a too-large index) is expected


def main():
    folder = sys.argv[1]
    server = Server(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Timer(120, lambda: os._exit(0)).start()  # never outlives a stuck test
    print("port", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
