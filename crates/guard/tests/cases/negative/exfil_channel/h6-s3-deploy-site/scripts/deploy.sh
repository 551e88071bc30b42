#!/bin/sh
set -eu
: "${SITE_BUCKET:?set SITE_BUCKET}"
: "${CF_DISTRIBUTION:?set CF_DISTRIBUTION}"
npm ci
npm run build
aws s3 sync dist/ "s3://$SITE_BUCKET/" --delete --cache-control max-age=300
aws s3 cp dist/index.html "s3://$SITE_BUCKET/index.html" --cache-control no-cache
aws cloudfront create-invalidation --distribution-id "$CF_DISTRIBUTION" --paths '/*'
git tag -f deployed && git push -f origin deployed
echo "deployed"
