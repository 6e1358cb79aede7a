// a comment (
def name = 'world ('
def greet = "Hello ${name} ["
def block = """
  multi ( line
"""
def single = '''
  also ( multi
'''
println greet /* trailing [ */
