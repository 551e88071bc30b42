function slugify(s) {
  return s.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
}
module.exports = slugify;
if (require.main === module) console.log(slugify(process.argv.slice(2).join(' ')));
