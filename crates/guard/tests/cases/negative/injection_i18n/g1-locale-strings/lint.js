const fs = require("fs");
const en = JSON.parse(fs.readFileSync("locales/en.json", "utf8"));
for (const f of fs.readdirSync("locales")) {
  const other = JSON.parse(fs.readFileSync(`locales/${f}`, "utf8"));
  const missing = Object.keys(en).filter((k) => !(k in other));
  if (missing.length) console.log(f, "missing", missing.join(", "));
}
