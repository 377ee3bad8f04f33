"""Shared by the schema-drift tests (.mlpackage and ONNX): the messages and enums of an encoded
``google.protobuf.FileDescriptorSet``, by full name."""

from __future__ import annotations

from google.protobuf import descriptor_pb2


def descriptors(fds_bytes: bytes) -> dict[str, descriptor_pb2.DescriptorProto | descriptor_pb2.EnumDescriptorProto]:
    """Every message and enum (nested ones too) of the set, keyed ``package.Outer.Inner``."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(fds_bytes)
    found = {}

    def walk(prefix, messages, enums):
        for e in enums:
            found[f"{prefix}.{e.name}"] = e
        for m in messages:
            name = f"{prefix}.{m.name}"
            found[name] = m
            walk(name, m.nested_type, m.enum_type)

    for f in fds.file:
        walk(f.package, f.message_type, f.enum_type)
    return found
