import base64
import binascii
import codecs


def b64(text):
    return base64.b64encode(text.encode()).decode()


def unb64(text):
    return base64.b64decode(text).decode()


def unhex(text):
    return binascii.unhexlify(text).decode()


def rot13(text):
    return codecs.decode(text, "rot13")
