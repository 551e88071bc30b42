API = "https://api.github.com"
GIT = "git"
LOG_ARGS = ["log", "--oneline", "-n", "20"]
TIMEOUT = 10
