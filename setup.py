"""Only the optional C extensions live here; everything else is in pyproject.toml.

Four extensions, each optional: when no C compiler is available the build skips them and the pure-Python
code runs instead (same results, slower). ``auditor.formats._cwalk`` speeds up the 'index', 'headers' and
'deep' depths; ``auditor.formats._coffsets`` the ``__consumer_offsets`` replay; ``auditor.keys._ckeys`` the
key statistics; ``auditor.formats._cmessage`` the decoding of Kafka messages (metadata log, coordinator
records, remote log metadata).
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
        Extension(  # key statistics (Python fallback: auditor/keys/sketches.py KeyStats.add)
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
