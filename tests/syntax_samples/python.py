# a comment (
import re


def f(x):
    """A docstring ( with "quotes"
    over lines [
    """
    s = 'it\'s ('
    t = f"value {x} ["
    r = r"C:\dir\\"
    b = b'bytes ('
    block = '''
    multi ( line
    '''
    return s  # trailing (
