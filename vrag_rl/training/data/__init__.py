"""Dataset converters for training: QA files → the parquet verl reads (`python -m vrag_rl.training.data`)."""
from vrag_rl.training.data.verl_parquet import (
    AGENT_NAME,
    ConversionReport,
    DatasetConversionError,
    check_parquet,
    convert_file,
    convert_records,
    example_to_row,
    write_parquet,
)

__all__ = ["AGENT_NAME", "ConversionReport", "DatasetConversionError", "check_parquet", "convert_file",
           "convert_records", "example_to_row", "write_parquet"]
