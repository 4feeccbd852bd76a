package store

func removeBenchCorpus() {}
