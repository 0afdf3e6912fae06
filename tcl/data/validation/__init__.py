"""Great Expectations validation of a platform's records, one module per job.

* `suite`: the expectation suite, the columns GE sees, one batch validated (`Validator`);
* `batches`: the store's parts read as RECORD_SCHEMA, planned into batches, each validated
  (the unit of work, here or on a Dask worker) into its quarantine entries and passing rows;
* `platform`: a platform's run: outputs written, summary, MLflow run, `ValidationFailed`.
"""
