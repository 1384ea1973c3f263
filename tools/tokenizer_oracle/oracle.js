// Writes the expected encodings of the parity corpus, computed by the Hugging Face `tokenizers`
// npm package (the reference implementation), one JSON line per corpus line:
//   {"ids": [...], "decoded": "...", "decoded_skip_special": "..."}
// Variants (tests/data/tokenizer/variants/*.json, from make_variants.js) are run on every third
// line plus the last 60 lines (the added-token flag probes), each output line carrying "line".
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

async function expectations(file, corpus, lineNumbers, withLine) {
  const tokenizer = Tokenizer.fromFile(file);
  const lines = [];
  for (const index of lineNumbers) {
    const encoding = await tokenizer.encode(corpus[index], null, { addSpecialTokens: false });
    const ids = encoding.getIds();
    const decoded = await tokenizer.decode(ids, false);
    const decodedSkipSpecial = await tokenizer.decode(ids, true);
    const entry = withLine ? { line: index + 1 } : {};
    lines.push(JSON.stringify({ ...entry, ids, decoded, decoded_skip_special: decodedSkipSpecial }));
  }
  return lines;
}

async function main() {
  const corpus = fs.readFileSync(path.join(dataDir, 'corpus.jsonl'), 'utf8')
    .split('\n').filter((line) => line.length > 0).map((line) => JSON.parse(line));
  const all = corpus.map((_, index) => index);
  for (const [name, file] of Object.entries(tokenizers)) {
    const out = path.join(dataDir, `expected_${name}.jsonl`);
    fs.writeFileSync(out, (await expectations(file, corpus, all, false)).join('\n') + '\n');
    console.log(`${name}: ${corpus.length} strings -> ${path.relative(root, out)}`);
  }
  const subset = all.filter((index) => index % 3 === 0 || index >= corpus.length - 60);
  const variantDir = path.join(dataDir, 'variants');
  for (const file of fs.readdirSync(variantDir).filter((f) => f.endsWith('.json')).sort()) {
    const name = path.basename(file, '.json');
    const out = path.join(dataDir, `expected_variant_${name}.jsonl`);
    fs.writeFileSync(out, (await expectations(path.join(variantDir, file), corpus, subset, true)).join('\n') + '\n');
    console.log(`variant ${name}: ${subset.length} strings -> ${path.relative(root, out)}`);
  }
}

main().catch((error) => { console.error(error); process.exit(1); });
