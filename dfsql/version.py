"""dfsql's version, at the bottom of the house: ``dfsql.__version__`` and the shell's
banner both read it, so the shell need not import the package facade (which imports the
notebook, and so the shell)."""

__version__ = "0.1.0"
