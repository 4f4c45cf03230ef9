"""Avro encoding of every record on dcb-streams' topics.

Default: Avro single-object encoding (a 2-byte marker, the schema's CRC-64-AVRO
fingerprint, the Avro body), resolved against the schemas in ``schemas/``.
With a schema registry URL configured: the Confluent wire format instead.
"""

from streams.codec.avro_codec import AvroCodec, codec_from_settings
from streams.codec.catalog import SchemaCatalog

__all__ = ["AvroCodec", "SchemaCatalog", "codec_from_settings"]
