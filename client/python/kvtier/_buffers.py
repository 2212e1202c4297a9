"""Turning Python objects into what the C ABI takes: token ids as uint32, buffers as pointers.

This is the one place that knows which objects are memory. Host buffers come in through the
buffer protocol (bytes, bytearray, memoryview, array.array, mmap, numpy arrays), so nothing here
imports numpy or torch; device tensors (the GPU issue) are meant to be added here, by duck typing,
without importing torch either.
"""

from __future__ import annotations

import array
import ctypes
from typing import Any, Iterable, Tuple, Union

Tokens = Union[Iterable[int], Any]  # any sequence of ints, or a 1-D integer buffer
_INT_FORMATS = frozenset("bBhHiIlLqQnN")


def token_array(tokens: Tokens) -> array.array:
    """`tokens` as a contiguous array('I') (uint32), copied once; ValueError/TypeError if they are
    not integers in [0, 2**32). An array('I') is used as it is."""
    if isinstance(tokens, array.array) and tokens.typecode == "I" and tokens.itemsize == 4:
        return tokens
    try:
        view = memoryview(tokens)
    except TypeError:
        view = None
    if view is not None:
        if view.ndim != 1:
            raise ValueError(f"tokens: expected one dimension, got shape {view.shape}")
        fmt = view.format.lstrip("@=<")
        if fmt in ("I", "L") and view.itemsize == 4:  # uint32 already: one memcpy
            out = array.array("I")
            out.frombytes(view.tobytes())
            return out
        if fmt not in _INT_FORMATS:
            raise TypeError(f"tokens: a buffer of format {view.format!r} is not integers")
        tokens = view.tolist()
    try:
        return array.array("I", tokens)
    except OverflowError as e:
        raise ValueError("tokens: every token id must be in [0, 2**32)") from e
    except TypeError as e:
        raise TypeError(f"tokens: expected a sequence of ints ({e})") from e


def uint32_pointer(values: array.array) -> "ctypes._Pointer":
    """A uint32_t* into `values` (which the caller keeps alive across the call)."""
    return ctypes.cast(values.buffer_info()[0], ctypes.POINTER(ctypes.c_uint32))


def host_span(obj: Any, writable: bool, what: str) -> Tuple[int, int, Any]:
    """(address, bytes, keepalive) of host buffer `obj`; hold keepalive until the call returns.

    Zero-copy for bytes and for writable C-contiguous buffers. A read-only buffer that is not
    bytes is copied once (ctypes cannot take its address); `writable` refuses those instead.
    """
    if isinstance(obj, bytes) and not writable:
        return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0, len(obj), obj
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what}: {type(obj).__name__} is not a buffer") from None
    if not view.c_contiguous:
        if writable:
            raise ValueError(f"{what}: the buffer is not contiguous")
        view = memoryview(view.tobytes())
    if view.readonly:
        if writable:
            raise TypeError(f"{what}: the buffer is read-only")
        data = view.tobytes()
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0, len(data), data
    nbytes = view.nbytes
    if nbytes == 0:
        return 0, 0, view
    window = (ctypes.c_char * nbytes).from_buffer(view)
    return ctypes.addressof(window), nbytes, window
