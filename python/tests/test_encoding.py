"""The Python module renders the same prompts as the C++ CLI and the golden files, and parses
model output the same way. Run by ctest with PYTHONPATH=<build>/python."""
import json
import os
import subprocess
import tempfile
import unittest

import deepinfer

DATA = os.environ.get("DEEPINFER_TEST_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
CLI = os.environ.get("DEEPINFER_CLI", "")
V3_CONFIG = os.path.join(DATA, "tokenizers", "deepseek-v3", "tokenizer_config.json")


def golden(fmt):
    with open(os.path.join(DATA, "encoding", f"golden_{fmt}.json"), encoding="utf-8") as f:
        return json.load(f)["cases"]


class RenderTest(unittest.TestCase):
    def test_goldens_render_identically(self):
        checked = 0
        for fmt in ("v3", "v3.1", "v3.2", "v4", "v4.1"):
            config = V3_CONFIG if fmt == "v3" else None
            for case in golden(fmt):
                with self.subTest(fmt=fmt, case=case["name"]):
                    if "error" in case:
                        with self.assertRaises(ValueError):
                            deepinfer.render_prompt(case["request"], fmt, config)
                    else:
                        self.assertEqual(deepinfer.render_prompt(case["request"], fmt, config), case["expected"])
                        checked += 1
        self.assertGreater(checked, 100)

    def test_matches_cli(self):
        # A missing CLI is a failure, not a skip (ctest passes DEEPINFER_CLI).
        self.assertTrue(CLI and os.path.exists(CLI), f"set DEEPINFER_CLI to the deepinfer binary (got {CLI!r})")
        for fmt in ("v3.2", "v4", "v4.1"):
            for case in golden(fmt)[:8]:
                if "error" in case:
                    continue
                with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
                    json.dump(case["request"], f, ensure_ascii=False)
                try:
                    out = subprocess.run([CLI, "encode", "--format", fmt, f.name], capture_output=True, check=True)
                finally:
                    os.unlink(f.name)
                self.assertEqual(out.stdout.decode("utf-8"), deepinfer.render_prompt(case["request"], fmt))

    def test_token_ids(self):
        tokenizer = deepinfer.Tokenizer(os.path.join(DATA, "tokenizers", "deepseek-v3", "tokenizer.json"))
        request = {"messages": [{"role": "user", "content": "Hello!"}]}
        ids = deepinfer.render_prompt_ids(request, "v4", tokenizer)
        self.assertEqual(tokenizer.decode(ids), deepinfer.render_prompt(request, "v4"))
        self.assertEqual(ids[0], 0)  # <｜begin▁of▁sentence｜>

    def test_bad_input_raises(self):
        with self.assertRaises(ValueError):
            deepinfer.render_prompt({"messages": [{"role": "wizard", "content": "x"}]}, "v4")
        with self.assertRaises(ValueError):
            deepinfer.render_prompt({"messages": []}, "v9")


class ParseTest(unittest.TestCase):
    def test_streaming_equals_one_piece(self):
        with open(os.path.join(DATA, "encoding", "output_goldens.json"), encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        for case in cases:
            with self.subTest(case=case["name"]):
                kwargs = dict(format=case["format"], thinking=case["thinking"], stop=case.get("stop", []))
                whole = deepinfer.parse_output(case["output"], **kwargs)
                parser = deepinfer.OutputParser(**kwargs)
                content = ""
                for byte in case["output"].encode("utf-8"):
                    content += parser.push(bytes([byte])).get("content", "")
                content += parser.finish().get("content", "")
                self.assertEqual(parser.message, whole)
                self.assertEqual(content, whole["content"])
                expected = case["expected"]
                self.assertEqual(whole["content"], expected["content"])
                self.assertEqual([c["function"]["name"] for c in whole.get("tool_calls", [])],
                                 [c["name"] for c in expected["tool_calls"]])


if __name__ == "__main__":
    unittest.main()
