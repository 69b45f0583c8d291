"""Devices: where an array lives and where a kernel runs (DLPack ``DLDevice``).

Example::

    >>> from ingot.runtime.device import cpu, cuda
    >>> cpu(0)
    cpu(0)
    >>> cpu(0) == cpu()
    True
    >>> cuda(0).device_type
    2
"""

from __future__ import annotations

from . import abi

_TYPE_NAMES = {abi.DL_CPU: "cpu", abi.DL_CUDA: "cuda", abi.DL_CUDA_HOST: "cuda_host"}
_TYPE_OF_NAME = {"cpu": abi.DL_CPU, "llvm": abi.DL_CPU, "c": abi.DL_CPU,
                 "cuda": abi.DL_CUDA, "gpu": abi.DL_CUDA, "cuda_host": abi.DL_CUDA_HOST}


class Device:
    """A device: a DLPack device type and an ordinal.

    Devices are small immutable values; they compare and hash by ``(device_type,
    device_id)``.

    Example::

        >>> d = Device(1, 0)
        >>> d.device_type, d.device_id, str(d)
        (1, 0, 'cpu(0)')
    """

    __slots__ = ("_type", "_id")

    def __init__(self, device_type: int, device_id: int = 0):
        if isinstance(device_type, str):
            device_type = _parse_type(device_type)
        if int(device_id) < 0:
            raise ValueError(f"device_id must be >= 0, got {device_id}")
        object.__setattr__(self, "_type", int(device_type))
        object.__setattr__(self, "_id", int(device_id))

    def __setattr__(self, name, value):
        raise AttributeError("Device is immutable; create a new one with ingot.cpu(i) / ingot.cuda(i)")

    @property
    def device_type(self) -> int:
        """DLPack device type code (1 = CPU, 2 = CUDA).

        Example::

            >>> cpu().device_type
            1
        """
        return self._type

    @property
    def device_id(self) -> int:
        """Ordinal of the device among devices of its type.

        Example::

            >>> cuda(1).device_id
            1
        """
        return self._id

    @property
    def type_name(self) -> str:
        """Short name of the device type (``"cpu"``, ``"cuda"``).

        Example::

            >>> cuda().type_name
            'cuda'
        """
        return _TYPE_NAMES.get(self._type, f"device{self._type}")

    def is_cpu(self) -> bool:
        """Whether host code can read this device's memory directly.

        Example::

            >>> cpu().is_cpu(), cuda().is_cpu()
            (True, False)
        """
        return self._type in (abi.DL_CPU, abi.DL_CUDA_HOST)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._type, self._id)

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and self._type == other._type and self._id == other._id

    def __hash__(self) -> int:
        return hash((self._type, self._id))

    def __repr__(self) -> str:
        return f"{self.type_name}({self._id})"

    __str__ = __repr__

    def __reduce__(self):
        return (Device, (self._type, self._id))


def _parse_type(name: str) -> int:
    key = name.strip().lower()
    if key not in _TYPE_OF_NAME:
        raise ValueError(f"unknown device type {name!r}; expected one of {sorted(_TYPE_OF_NAME)}")
    return _TYPE_OF_NAME[key]


def cpu(device_id: int = 0) -> Device:
    """The host CPU.

    Example::

        >>> cpu()
        cpu(0)
    """
    return Device(abi.DL_CPU, device_id)


def cuda(device_id: int = 0) -> Device:
    """An NVIDIA GPU (memory on it is not supported by the CPU runtime yet).

    Example::

        >>> cuda(0)
        cuda(0)
    """
    return Device(abi.DL_CUDA, device_id)


def device(dev_type, device_id: int = 0) -> Device:
    """Make a device from a name (``"cpu"``, ``"cuda"``, ``"llvm"``), a type code or a Device.

    Example::

        >>> device("cuda", 1)
        cuda(1)
        >>> device("llvm")
        cpu(0)
    """
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, str) and ":" in dev_type:
        name, _, idx = dev_type.partition(":")
        return Device(_parse_type(name), int(idx))
    return Device(dev_type, device_id)
