"""What DAL observes around a pipeline and puts back: git's references, protected names, records of walls."""
