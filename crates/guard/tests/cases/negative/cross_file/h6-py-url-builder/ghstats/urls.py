from .config import API_HOST, SCHEME


def base():
    return SCHEME + API_HOST


def search(query):
    return base() + "/search/issues?q=" + query
