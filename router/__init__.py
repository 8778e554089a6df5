"""Label-token routing of each task to one capability adapter, or to the base model."""
