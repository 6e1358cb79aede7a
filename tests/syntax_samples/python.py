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


def g(x):
    a = f"{x["key"]} ("
    b = rb'\x00 ['
    c = '''has """ inside ('''
    d = "a # not a comment ("
    e = 'one' 'two ['
    return a  # it's done
