"""What builds the sandbox from its settings: the settings of every part
(``settings``) and the pool registry that turns a pool's name and those settings into
a running pool (``pool_registry``). The top of the sandbox's layers: the server comes
here, and nothing in the sandbox imports it.
"""
