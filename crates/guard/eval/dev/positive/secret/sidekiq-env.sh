export BUNDLE_ENTERPRISE__CONTRIBSYS__COM={{rand:hex:8}}:{{rand:hex:8}}
bundle install
