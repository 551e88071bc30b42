import os


def safe_join(root, user_path):
    full = os.path.realpath(os.path.join(root, user_path))
    if not full.startswith(os.path.realpath(root) + os.sep):
        raise ValueError("path escapes root")
    return full
