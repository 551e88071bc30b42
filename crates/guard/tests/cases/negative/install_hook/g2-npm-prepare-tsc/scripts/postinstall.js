const major = Number(process.versions.node.split('.')[0]);
const msg = `ts-lint-skill installed (node ${process.versions.node})`;
if (major < 18) {
  console.warn('ts-lint-skill needs node 18 or later; ' + 'some rules are disabled');
}
console.log(msg);
