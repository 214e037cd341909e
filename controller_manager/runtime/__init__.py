"""The daemon's runtime: informers, work queues, the controller runner, the event recorder and leader election.

Everything here sits between the controllers and the API client: it imports ``client`` and ``api`` and is
imported by ``controllers`` and ``manager``, never the other way round.
"""
