const fs = require('fs');
const file = process.argv[2];
try {
  JSON.parse(fs.readFileSync(file, 'utf8'));
  console.log('ok');
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
