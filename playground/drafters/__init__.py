"""Drafters: each proposes tokens for the target to verify, through the protocol the loop defines
(``playground.decoding.draft``); ``registry`` holds every fact about each kind."""
