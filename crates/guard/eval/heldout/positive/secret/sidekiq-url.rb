source 'https://{{rand:hex:8}}:{{rand:hex:8}}@gems.contribsys.com/' do
  gem 'sidekiq-pro'
end
