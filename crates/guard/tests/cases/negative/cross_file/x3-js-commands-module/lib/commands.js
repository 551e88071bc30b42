module.exports = {
  build: 'npm run build',
  test: 'npm test -- --ci',
  lint: ['npx', 'eslint', '.'].join(' '),
};
