"""Job specs: decode a v1 JSON / v2 YAML body, validate it against ``job_schemas/``, normalize to JobSpec."""

from pai.jobspec.parse import MASK, ParsedJob, masked_config, parse_job, stored_config
from pai.jobspec.schema import ProtocolVersion, load_schema

__all__ = ["MASK", "ParsedJob", "ProtocolVersion", "load_schema", "masked_config", "parse_job", "stored_config"]
