const fs = require("fs");
const path = require("path");

const dir = path.join(__dirname, "..", "locales");
const base = JSON.parse(fs.readFileSync(path.join(dir, "en.json"), "utf8"));
const re = /\{[a-zA-Z_]+\}/g;
let bad = 0;
for (const file of fs.readdirSync(dir)) {
  if (file === "en.json") continue;
  const other = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
  for (const [k, v] of Object.entries(base)) {
    const want = (v.match(re) || []).sort().join(",");
    const got = ((other[k] || "").match(re) || []).sort().join(",");
    if (want !== got) {
      console.log(`${file}: ${k}: ${got} != ${want}`);
      bad++;
    }
  }
}
process.exit(bad ? 1 : 0);
