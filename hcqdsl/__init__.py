"""hcqdsl: a language and toolchain for AMD hardware command queues."""
