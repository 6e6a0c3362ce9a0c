"""scatterkit: the Engram store (scatterkit.engram) for Python, over the Go
library libscatterkit.so (tools/capi).

    from scatterkit.engram import EngramStore

Importing the package loads nothing: the library is loaded on first use,
from the package directory or $SCATTERKIT_LIB. torch is never imported
unless asked for (EngramStore.empty(..., like="torch")).
"""

from ._capi import (
    NoConversionError,
    RowIDError,
    StoreClosedError,
    TableExistsError,
    UnknownTableError,
    library_path,
)

__version__ = "0.0.0"

__all__ = [
    "NoConversionError",
    "RowIDError",
    "StoreClosedError",
    "TableExistsError",
    "UnknownTableError",
    "library_path",
    "__version__",
]
