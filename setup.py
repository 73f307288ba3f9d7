"""Only the optional C extension lives here; everything else is in pyproject.toml.

``auditor.formats._cwalk`` speeds up the 'headers' and 'index' depths. It is optional: when no C compiler is
available the build skips it and the scanner uses its pure-Python walker (same rows, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "auditor.formats._cwalk",
            sources=["auditor/formats/_cwalk.c"],
            depends=["auditor/formats/_record_batch.h", "auditor/formats/_legacy_message.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(  # the replay of plain __consumer_offsets batches (Python fallback: offsets_records.py)
            "auditor.formats._coffsets",
            sources=["auditor/formats/_coffsets.c"],
            depends=["auditor/formats/_record_batch.h", "auditor/formats/_record_reading.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(  # key statistics of issue 23 (Python fallback: auditor/keys/sketches.py KeyStats.add)
            "auditor.keys._ckeys",
            sources=["auditor/keys/_ckeys.c"],
            depends=["auditor/formats/_record_batch.h", "auditor/formats/_record_reading.h",
                     "auditor/formats/_legacy_message.h"],
            include_dirs=["auditor/formats"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(  # Kafka messages decoded from the spec tables' programs (Python fallback: kafka_message.py)
            "auditor.formats._cmessage",
            sources=["auditor/formats/_cmessage.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
