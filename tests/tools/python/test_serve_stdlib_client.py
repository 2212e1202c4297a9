"""`kvtier serve` through Python's standard library, as a script with no dependencies would use it:
http.client on one keep-alive connection (generation, listing, errors and streams one after another
on the same socket) and urllib.request reading a stream line by line as it arrives.

Environment: KVTIER (the kvtier binary), KVTIER_TOKENIZER (third_party/tokenizers/qwen3).
"""
import http.client
import json
import os
import signal
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

MODEL = "py-test-model"


class ServeStdlibClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        model = os.path.join(cls.tmp.name, "model")
        subprocess.run([os.environ["KVTIER"], "make-model", "--out", model, "--tokenizer",
                        os.environ["KVTIER_TOKENIZER"], "--max-position", "256"],
                       check=True, stdout=subprocess.DEVNULL)
        cls.server = subprocess.Popen(
            [os.environ["KVTIER"], "serve", "--model", model, "--device", "cpu", "--port", "0",
             "--served-model-name", MODEL],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = cls.server.stdout.readline()
        if "serving" not in line:
            cls.server.kill()
            raise RuntimeError("kvtier serve did not start: " + line + cls.server.stdout.read())
        cls.base = line.split(" on ")[1].split(" ")[0]  # http://127.0.0.1:PORT
        cls.port = int(cls.base.rsplit(":", 1)[1])

    @classmethod
    def tearDownClass(cls):
        if cls.server.poll() is None:
            cls.server.kill()
            cls.server.wait()
        cls.tmp.cleanup()

    def post(self, conn, path, body):
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())

    def test_one_keep_alive_connection_serves_requests_in_turn(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        body = {"model": MODEL, "prompt": "Hello", "max_tokens": 4, "temperature": 0,
                "ignore_eos": True}
        status, first = self.post(conn, "/v1/completions", body)
        self.assertEqual(status, 200)
        self.assertEqual(first["usage"]["completion_tokens"], 4)
        conn.request("GET", "/v1/models")
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        self.assertEqual(json.loads(response.read())["data"][0]["id"], MODEL)
        status, error = self.post(conn, "/v1/completions", dict(body, temperature="hot"))
        self.assertEqual(status, 400)
        self.assertEqual(error["error"]["param"], "temperature")
        conn.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)))
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        events = [e for e in response.read().decode().split("\n\n") if e]
        self.assertEqual(events[-1], "data: [DONE]")
        text = "".join(json.loads(e[len("data: "):])["choices"][0]["text"] for e in events[:-1])
        self.assertEqual(text, first["choices"][0]["text"])
        status, again = self.post(conn, "/v1/completions", body)  # the same socket still works
        self.assertEqual(status, 200)
        self.assertEqual(again["choices"][0]["text"], first["choices"][0]["text"])
        conn.close()

    def test_urllib_reads_a_chat_stream_line_by_line(self):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
                "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        request = urllib.request.Request(self.base + "/v1/chat/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        chunks = []
        with urllib.request.urlopen(request, timeout=120) as response:
            self.assertEqual(response.headers["Content-Type"], "text/event-stream")
            for raw in response:
                line = raw.decode().rstrip("\n")
                if not line:
                    continue
                self.assertTrue(line.startswith("data: "), line)
                if line == "data: [DONE]":
                    break
                chunks.append(json.loads(line[len("data: "):]))
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "length")
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 5)

    def test_urllib_sees_openai_errors(self):
        request = urllib.request.Request(self.base + "/v1/completions",
                                         data=b'{"model": "other", "prompt": "x"}')
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=60)
        self.assertEqual(caught.exception.code, 404)
        self.assertEqual(json.loads(caught.exception.read())["error"]["code"], "model_not_found")

    def test_zz_sigterm_exits_0(self):
        self.server.send_signal(signal.SIGTERM)
        self.assertEqual(self.server.wait(timeout=60), 0)


if __name__ == "__main__":
    unittest.main()
