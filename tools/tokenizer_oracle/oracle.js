// Writes the expected encodings of the parity corpus, computed by the Hugging Face `tokenizers`
// npm package (the reference implementation), one JSON line per corpus line:
//   {"ids": [...], "decoded": "...", "decoded_skip_special": "..."}
// Usage (from the repository root): node tools/tokenizer_oracle/oracle.js
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const root = path.resolve(__dirname, '..', '..');
const dataDir = path.join(root, 'tests', 'data', 'tokenizer');
const tokenizers = {
  'deepseek-v3': path.join(root, 'tests', 'data', 'tokenizers', 'deepseek-v3', 'tokenizer.json'),
  'kjv-tiny-v4': path.join(root, 'models', 'kjv-tiny-v4', 'tokenizer.json'),
};

async function main() {
  const corpus = fs.readFileSync(path.join(dataDir, 'corpus.jsonl'), 'utf8')
    .split('\n').filter((line) => line.length > 0).map((line) => JSON.parse(line));
  for (const [name, file] of Object.entries(tokenizers)) {
    const tokenizer = Tokenizer.fromFile(file);
    const lines = [];
    for (const text of corpus) {
      const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
      const ids = encoding.getIds();
      const decoded = await tokenizer.decode(ids, false);
      const decodedSkipSpecial = await tokenizer.decode(ids, true);
      lines.push(JSON.stringify({ ids, decoded, decoded_skip_special: decodedSkipSpecial }));
    }
    const out = path.join(dataDir, `expected_${name}.jsonl`);
    fs.writeFileSync(out, lines.join('\n') + '\n');
    console.log(`${name}: ${corpus.length} strings -> ${path.relative(root, out)}`);
  }
}

main().catch((error) => { console.error(error); process.exit(1); });
