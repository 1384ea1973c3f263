// Encode throughput of the Hugging Face `tokenizers` npm package on the same text mix as
// bench/tokenizer_bench.cpp: the parity corpus lines (prose, code, CJK, other scripts, emoji,
// numbers, whitespace, special tokens; lines over 1 KiB left out) joined with newlines into documents of >= 4 KiB, encoded
// one document per call, sequentially (single-threaded, like our encode()).
// Usage: node tools/tokenizer_oracle/bench.js <tokenizer.json> [seconds]
// Prints one JSON line: {"tokenizer", "documents", "bytes", "tokens", "iterations", "mb_per_s"}
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const root = path.resolve(__dirname, '..', '..');

function benchDocuments() {
  const corpus = fs.readFileSync(path.join(root, 'tests', 'data', 'tokenizer', 'corpus.jsonl'), 'utf8')
    .split('\n').filter((line) => line.length > 0).map((line) => JSON.parse(line));
  const documents = [];
  let current = '';
  for (const text of corpus) {
    if (Buffer.byteLength(text, 'utf8') > 1024) continue;  // the artificial long runs are not typical text
    current += text + '\n';
    if (Buffer.byteLength(current, 'utf8') >= 4096) {
      documents.push(current);
      current = '';
    }
  }
  if (current.length > 0) documents.push(current);
  return documents;
}

async function main() {
  const file = process.argv[2];
  const seconds = Number(process.argv[3] || '3');
  const tokenizer = Tokenizer.fromFile(file);
  const documents = benchDocuments();
  let bytes = 0;
  for (const document of documents) bytes += Buffer.byteLength(document, 'utf8');
  const encodeAll = async () => {
    let tokens = 0;
    for (const document of documents) {
      tokens += (await tokenizer.encode(document, null, { addSpecialTokens: false })).getIds().length;
    }
    return tokens;
  };
  let tokens = await encodeAll();  // warm-up (fills HF's word cache, as our benchmark's warm-up does)
  let iterations = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < seconds || iterations < 2) {
    tokens = await encodeAll();
    ++iterations;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  const mbPerSecond = (bytes * iterations) / elapsed / 1e6;
  console.log(JSON.stringify({ tokenizer: file, documents: documents.length, bytes, tokens, iterations, mb_per_s: mbPerSecond }));
}

main().catch((error) => { console.error(error); process.exit(1); });
