"""Drafters: each proposes tokens for the target to verify, through the protocol the loop defines
(``playground.decoding.draft``); one ``base.BaseDrafter`` subclass per kind declares what it can
do, and ``registry`` lists the kinds with what else each needs."""
