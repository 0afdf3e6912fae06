"""Training cost models on featurized records: the loop, the bundle, MLflow tracking."""
