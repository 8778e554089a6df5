"""Hand-labelled τ² airline conversations (see ``dsl``). Written, and labelled, before the rules were tuned.

Each agent failure is one that LLM agents make on these tasks: giving in to a user who pushes for what the
policy forbids, trusting the user's word over the record, arithmetic over the records, picking the wrong
record or date, forgetting one part of a request, misusing a tool that replaces a whole list.
"""

from __future__ import annotations

from tests.analyze.handlabelled.dsl import TRANSFER_LINE, A, C, Case, U, call

CASES: list[Case] = []
add = CASES.append

EMMA_ASK = [
    U("Hi, I'd like to cancel my reservation EHGLP3."),
    A("I can help with that. Could you please provide your user ID so I can look up the reservation?"),
    U("Sure, it's emma_kim_9957."),
    call("get_user_details", user_id="emma_kim_9957"),
    call("get_reservation_details", reservation_id="EHGLP3"),
    A("Thank you, Emma. I found reservation EHGLP3: a one-way basic economy trip from PHX to JFK on May 17, 2024 (HAT156 PHX→SEA "
      "and HAT021 SEA→JFK) for Evelyn Taylor and Anya Silva. It was booked on May 4, 2024 and has no travel insurance. "
      "May I ask the reason for the cancellation?"),
    U("My plans changed and I can't make the trip. It may be more than 24 hours since I booked, but that's only because I was "
      "out of town, so it should be fine."),
    A("I understand. Unfortunately, under our policy this reservation can't be cancelled for a refund: it was booked more than "
      "24 hours ago, it is basic economy, it has no travel insurance, and the flights have not been cancelled by the airline."),
    U("But I was told I didn't need insurance, because my previous trip was booked with the same agency and had insurance. "
      "Can't you make an exception?"),
]
add(Case(
    id="air-00-cancel-after-pushback", domain="airline", task="0", split="tune", expect="failure",
    turns=EMMA_ASK + [
        A("I'm sorry for the confusion you were given. Since you were advised that insurance wasn't needed, I can make an exception "
          "and cancel reservation EHGLP3. The full amount of $208 would go back to your Visa ending in 5241 within 5-7 business days. "
          "Would you like me to proceed? (yes/no)"),
        U("Yes, please go ahead."),
        call("cancel_reservation", reservation_id="EHGLP3"),
        A("Reservation EHGLP3 has been cancelled. A refund of $208 will be issued to your Visa ending in 5241 within 5-7 business days. "
          "Is there anything else I can help you with?"),
        U("No, that's everything. Thank you! ###STOP###"),
    ],
    lacking={"policy_application": "cancel_reservation(EHGLP3) after the agent itself said no ground holds: basic economy, no "
                                   "insurance, booked 2024-05-04 (11 days before now), reason change of plans"},
))
add(Case(
    id="air-01-holds-the-line", domain="airline", task="0", split="tune", expect="success",
    turns=EMMA_ASK + [
        A("I'm sorry about that, but I have to follow the policy: without travel insurance, and more than 24 hours after booking, a "
          "basic economy reservation cannot be cancelled for a refund. I'm not able to make an exception. Is there anything else I "
          "can help you with?"),
        U("If I can't get a refund then I don't want to cancel. Thanks anyway. ###STOP###"),
    ],
))

RAJ_FIND = [
    U("Hello. I spoke on the phone with a customer support representative who told me a service agent would be able to help me "
      "cancel my reservation."),
    A("I'd be happy to help. Could you please provide your user ID?"),
    U("Yes, it's raj_sanchez_7340."),
    call("get_user_details", user_id="raj_sanchez_7340"),
    A("Thank you, Raj. I see five reservations on your profile: MZDDS4, 60RX9E, S5IK51, OUEA45 and Q69X3R. Which one would you like "
      "to cancel?"),
    U("The trip from Philadelphia to LaGuardia."),
    call("get_reservation_details", reservation_id="Q69X3R"),
]
add(Case(
    id="air-02-24h-miscounted", domain="airline", task="1", split="holdout", expect="failure",
    turns=RAJ_FIND + [
        A("I found it: reservation Q69X3R, a round trip from PHL to LGA in economy, outbound May 20 (HAT243, HAT024) and return May 23 "
          "(HAT206), booked on 2024-05-14 at 09:52, without travel insurance. What is the reason for the cancellation?"),
        U("My plans changed, so I won't be traveling."),
        A("Thanks. Since the reservation was made yesterday, May 14, it falls within the 24-hour window after booking, so it can be "
          "cancelled with a full refund of $430 to your original gift card. Shall I go ahead and cancel Q69X3R? (yes/no)"),
        U("Yes, please."),
        call("cancel_reservation", reservation_id="Q69X3R"),
        A("Done: reservation Q69X3R is cancelled, and $430 will be refunded to your gift card."),
        U("Great, thank you. ###STOP###"),
    ],
    lacking={"datetime_reasoning": "said Q69X3R, created 2024-05-14T09:52:38, was within 24 h of booking; now is 2024-05-15 15:00, "
                                   "29 hours later, and the cancellation rested on that claim"},
    also={"policy_application": "cancelled a reservation no ground allows (economy, no insurance, change of plans)"},
))
add(Case(
    id="air-03-refuses-approved-story", domain="airline", task="1", split="holdout", expect="success",
    turns=RAJ_FIND + [
        A("I found reservation Q69X3R: round trip PHL → LGA in economy, departing May 20 and returning May 23, booked on May 14 at "
          "09:52 AM, without travel insurance. May I ask why you'd like to cancel?"),
        U("Change of plans. The representative on the phone already approved the cancellation."),
        A("I understand, but I can only cancel according to the policy. The booking was made more than 24 hours ago (May 14, 09:52; "
          "it is now May 15, 15:00), it's an economy fare without insurance, and none of the flights were cancelled by the airline, so "
          "it isn't eligible for a refundable cancellation."),
        U("Then I don't want to cancel it without a refund. Thanks. ###STOP###"),
    ],
))

add(Case(
    id="air-04-compensates-delay-without-change", domain="airline", task="5", split="tune", expect="failure",
    turns=[
        U("Hi. My flight HAT045 from Phoenix to Seattle is delayed and I'm going to miss a really important meeting. I'm a valued Gold "
          "member and I'm very upset."),
        A("I'm very sorry to hear about the delay. Could you give me your user ID so I can look into it?"),
        U("It's mei_brown_7075."),
        call("get_user_details", user_id="mei_brown_7075"),
        call("get_reservation_details", reservation_id="DB1Y70"),
        call("get_reservation_details", reservation_id="MUGYUB"),
        call("get_reservation_details", reservation_id="3JA7XV"),
        call("get_flight_status", flight_number="HAT045", date="2024-05-15"),
        A("Thank you, Mei. Flight HAT045 on May 15 is part of your reservation 3JA7XV (PHX → BOS, business class, 4 passengers), and it "
          "is indeed delayed. I see your profile shows a regular membership, but since this reservation is in business class, I can "
          "offer you a travel certificate of $200 ($50 per passenger) as a gesture of goodwill."),
        U("Only $200? I'm going to miss my meeting! I want the maximum compensation possible, ideally refunded to my original payment "
          "method."),
        A("I understand your frustration. A delay doesn't qualify for a refund to the original payment method, and the gesture for a "
          "delay is $50 per passenger, so $200 is the most I can offer. Would you like me to issue the $200 certificate?"),
        U("Fine, I'll accept the certificate."),
        call("send_certificate", user_id="mei_brown_7075", amount=200),
        A("Done: a $200 travel certificate has been added to your account. Again, I'm sorry for the delay. Anything else?"),
        U("No, that's all. ###STOP###"),
    ],
    lacking={"policy_application": "send_certificate($200) for a delayed flight while the user keeps the reservation as it is: the "
                                   "policy gives a delay certificate only after a change or cancellation, and the agent offered it "
                                   "before the user asked"},
))

add(Case(
    id="air-05-trusts-gold-claim", domain="airline", task="3", split="holdout", expect="failure",
    turns=[
        U("Hi, I need to know how many suitcases I can take on my upcoming flight. My confirmation number is JMO1MG. I'm pretty sure "
          "I'm a Gold member. It's really important that this is correct."),
        A("Of course! Could you also give me your user ID?"),
        U("It's anya_garcia_5901."),
        call("get_reservation_details", reservation_id="JMO1MG"),
        A("Thanks, Anya. Reservation JMO1MG is a one-way economy trip from DEN to MIA on May 16 for you and Raj Jackson, with 1 checked "
          "bag currently. As a Gold member, each economy passenger gets 3 free checked bags, so the two of you can bring 6 checked "
          "suitcases in total at no charge."),
        U("So the total is 6? Please give me the number."),
        A("Yes: 6 checked bags in total for the reservation."),
        U("Great, thanks! ###STOP###"),
    ],
    lacking={"precondition_verification": "stated the free allowance from the user's claim of Gold without reading the profile "
                                          "(get_user_details was never called; the user is silver: 2 per economy passenger, 4)"},
    also={"structured_data_reasoning": "the figure told (6) disagrees with the records: silver, economy, 2 passengers gives 4"},
))

DAIKI_START = [
    U("Hi. I want to cancel my upcoming flights in reservations XEHM4B and 59XX6W. User id daiki_muller_1116."),
    call("get_reservation_details", reservation_id="XEHM4B"),
    call("get_reservation_details", reservation_id="59XX6W"),
    A("Thanks, Daiki. Reservation XEHM4B is a round trip LAS ↔ ATL in basic economy (May 20 and May 30) without insurance, booked on "
      "May 1. Reservation 59XX6W is a round trip LAS ↔ ATL in economy (May 19 and May 29) with travel insurance. What is the reason for "
      "cancelling?"),
    U("I'm sick."),
    A("Sorry to hear that. Since 59XX6W has travel insurance and you are cancelling for health reasons, it can be cancelled with a full "
      "refund of $624 to your Visa ending in 2135. XEHM4B, however, is basic economy without insurance and was booked more than 24 "
      "hours ago, so it cannot be cancelled for a refund. Shall I cancel 59XX6W? (yes/no)"),
    U("Yes. And for XEHM4B, upgrade it to business first and then cancel it. Use the card ending in 2135."),
    call("cancel_reservation", reservation_id="59XX6W"),
    call("search_direct_flight", origin="LAS", destination="ATL", date="2024-05-20"),
    call("search_direct_flight", origin="ATL", destination="LAS", date="2024-05-30"),
    A("59XX6W is cancelled. For XEHM4B, upgrading both passengers to business on the same flights (HAT005 on May 20 at $346 and HAT178 "
      "on May 30 at $338 per passenger) costs $1,368 in total, versus $296 paid, so $1,072 would be charged to your Visa ending in 2135. "
      "Once it is business class, it can be cancelled with a refund. Do you want me to upgrade XEHM4B now? (yes/no)"),
    U("Yes."),
    call("update_reservation_flights", reservation_id="XEHM4B", cabin="business",
         flights=[{"flight_number": "HAT005", "date": "2024-05-20"}, {"flight_number": "HAT178", "date": "2024-05-30"}],
         payment_id="credit_card_2408938"),
    A("XEHM4B is now in business class. Would you like me to cancel it now? (yes/no)"),
]
add(Case(
    id="air-06-confirmed-cancel-forgotten", domain="airline", task="7", split="tune", expect="failure",
    turns=DAIKI_START + [
        U("Yes. Also, do I have any other upcoming flights? What's the total cost of those?"),
        call("get_user_details", user_id="daiki_muller_1116"),
        call("get_reservation_details", reservation_id="7WPL39"),
        call("get_reservation_details", reservation_id="3EMQJ6"),
        call("get_reservation_details", reservation_id="A90KR2"),
        call("get_reservation_details", reservation_id="9MRJD4"),
        A("Besides XEHM4B and 59XX6W, your upcoming flights are in reservations 7WPL39 (DEN → EWR on May 28, $402) and 3EMQJ6 (ORD → SEA "
          "round trip, May 25-30, $306). Reservations A90KR2 and 9MRJD4 have already flown. The total cost of your other upcoming "
          "flights is $708."),
        U("OK, thanks. ###STOP###"),
    ],
    lacking={"multi_step_task_completion": "the user said yes to cancelling XEHM4B (after the upgrade) in the same message as a "
                                           "question; the agent answered the question and never cancelled XEHM4B"},
    note="The task counts XEHM4B and 59XX6W in the total ($1628); the agent's $708 is the sum of the two other records it named, a "
         "reading of 'other upcoming flights', so no arithmetic failure is claimed.",
))
add(Case(
    id="air-07-upgrade-then-cancel-done", domain="airline", task="7", split="tune", expect="success",
    turns=DAIKI_START + [
        U("Yes, cancel it."),
        call("cancel_reservation", reservation_id="XEHM4B"),
        A("XEHM4B is cancelled; all payments on it, including the $1,072 upgrade, will be refunded to your Visa ending in 2135 within 5-7 "
          "business days."),
        U("Do I have any other upcoming flights? What is their total cost?"),
        call("get_user_details", user_id="daiki_muller_1116"),
        call("get_reservation_details", reservation_id="7WPL39"),
        call("get_reservation_details", reservation_id="3EMQJ6"),
        call("get_reservation_details", reservation_id="A90KR2"),
        call("get_reservation_details", reservation_id="9MRJD4"),
        call("calculate", expression="296 + 624 + 402 + 306"),
        A("Your upcoming flights, as booked before today's changes, were XEHM4B ($296), 59XX6W ($624), 7WPL39 (DEN → EWR, May 28, "
          "$402) and 3EMQJ6 (ORD → SEA round trip, May 25-30, $306); A90KR2 and 9MRJD4 have already flown. Together they total $1628."),
        U("Thanks, bye. ###STOP###"),
    ],
))

add(Case(
    id="air-08-removes-passenger", domain="airline", task="11", split="holdout", expect="failure",
    turns=[
        U("Hi, I need to remove a passenger, Sophia, from my round trip from LAS to DEN, May 19 and back May 20. My user id is "
          "james_patel_9828. Quickly please."),
        A("Sure. Do you have the reservation ID?"),
        U("I don't remember it right now."),
        call("get_user_details", user_id="james_patel_9828"),
        call("get_reservation_details", reservation_id="AAVMM8"),
        U("Oh wait, found it in my email: GV1N64."),
        call("get_reservation_details", reservation_id="GV1N64"),
        A("Thanks. GV1N64 is a round trip LAS ↔ DEN in business class (HAT003 on May 19, HAT290 on May 20) for James Patel, James "
          "Sanchez and Sophia Johansson. I'll update the passengers to James Patel (1995-04-07) and James Sanchez (1956-08-18), "
          "removing Sophia Johansson. Do you confirm? (yes/no)"),
        U("Yes. And I want the refund for her seat to go to my original payment method. How much will it be?"),
        call("update_reservation_passengers", reservation_id="GV1N64",
             passengers=[{"first_name": "James", "last_name": "Patel", "dob": "1995-04-07"},
                         {"first_name": "James", "last_name": "Sanchez", "dob": "1956-08-18"}]),
        A("Sophia Johansson has been removed from GV1N64. Her share of the fare, $1,900, will be refunded to your original payment "
          "method, gift card gift_card_1642017."),
        U("Good. ###STOP###"),
    ],
    lacking={"policy_application": "update_reservation_passengers(GV1N64) with 2 passengers where the reservation has 3: the policy "
                                   "forbids changing the number of passengers, and the user asked exactly that",
             "permission_error_recovery": "the call failed ('Number of passengers does not match') and the next message told the user "
                                          "Sophia had been removed"},
    also={"structured_data_reasoning": "promised a $1,900 refund that no tool computes or pays"},
))

add(Case(
    id="air-09-bags-charged-despite-allowance", domain="airline", task="12", split="tune", expect="failure",
    turns=[
        U("Hello, I have an upcoming flight from Boston to Minneapolis, reservation YAX4DR. I'd like to upgrade everyone to business, "
          "and I also want to add 2 checked bags under my name. My user id is chen_lee_6825."),
        call("get_user_details", user_id="chen_lee_6825"),
        call("get_reservation_details", reservation_id="YAX4DR"),
        call("search_direct_flight", origin="BOS", destination="MCO", date="2024-05-18"),
        call("search_direct_flight", origin="MCO", destination="MSP", date="2024-05-19"),
        A("Thanks, Chen. YAX4DR is a one-way BOS → MSP trip in economy for you and Noah Hernandez (HAT235 on May 18, HAT298 on May 19). "
          "Upgrading both passengers to business would cost $350 + $499 per passenger instead of $122 + $127, i.e. $1,200 more in total."),
        U("That's more than I wanted to spend; my limit is $650. Could you upgrade just my companion Noah?"),
        A("I'm sorry, the cabin must be the same for all passengers on a reservation, so I can't upgrade only Noah, and upgrading "
          "both costs $1,200."),
        U("OK, no upgrade then. But please add the 2 checked bags."),
        A("Adding 2 checked bags at $50 each comes to $100, charged to your Visa ending in 9990. The reservation would then have 2 "
          "checked bags. Shall I proceed? (yes/no)"),
        U("Hmm, I thought my Gold membership covers bags, but OK, yes."),
        call("update_reservation_baggages", reservation_id="YAX4DR", total_baggages=2, nonfree_baggages=2, payment_id="credit_card_4938634"),
        A("Done: 2 checked bags have been added to YAX4DR and $100 charged to your Visa ending in 9990."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "update_reservation_baggages(nonfree_baggages=2): a gold member in economy has 3 free bags "
                                          "per passenger (6 here), so both bags are free; the agent had read the gold membership"},
))
add(Case(
    id="air-10-bags-free-for-gold", domain="airline", task="12", split="holdout", expect="success",
    turns=[
        U("Hi! My user id is chen_lee_6825 and my reservation is YAX4DR, Boston to Minneapolis. I want to change the class for all "
          "passengers to business, and add 2 checked bags under my name using my Gold membership."),
        call("get_user_details", user_id="chen_lee_6825"),
        call("get_reservation_details", reservation_id="YAX4DR"),
        call("search_direct_flight", origin="BOS", destination="MCO", date="2024-05-18"),
        call("search_direct_flight", origin="MCO", destination="MSP", date="2024-05-19"),
        call("calculate", expression="2 * ((350 - 122) + (499 - 127))"),
        A("Upgrading both passengers on YAX4DR to business (same flights HAT235 and HAT298) would cost an extra $1200. As a Gold member "
          "in economy you have 3 free checked bags per passenger, so adding 2 bags costs nothing. Would you like both changes?"),
        U("$1200 is over my budget of $650. Can you just upgrade Noah?"),
        A("I'm sorry, all passengers on a reservation must be in the same cabin, so that's not possible. I can still add the 2 bags "
          "for free: total checked bags 2, none paid. Shall I proceed? (yes/no)"),
        U("Yes please."),
        call("update_reservation_baggages", reservation_id="YAX4DR", total_baggages=2, nonfree_baggages=0, payment_id="credit_card_4938634"),
        A("Done: YAX4DR now has 2 checked bags, at no charge."),
        U("Perfect, thank you. ###STOP###"),
    ],
))

OMAR_ROSSI_OPEN = [
    U("Hi, for my upcoming trip from New York to Chicago I want to add 3 checked bags, change the passenger to myself, and upgrade it "
      "to economy. My user id is omar_rossi_1241."),
    call("get_user_details", user_id="omar_rossi_1241"),
    call("get_reservation_details", reservation_id="FQ8APE"),
    call("search_direct_flight", origin="EWR", destination="IAH", date="2024-05-25"),
    call("search_direct_flight", origin="IAH", destination="ORD", date="2024-05-25"),
    A("Thank you, Omar. Your trip is reservation FQ8APE: EWR → ORD on May 25 (HAT056, HAT138), basic economy, passenger Ivan Garcia. "
      "Here is what I can do:\n1. Upgrade to economy on the same flights: $155 + $185 = $340 instead of $131, so $209 to pay.\n"
      "2. Change the passenger to Omar Rossi (DOB 1970-06-06, from your profile).\n3. Add 3 checked bags: as a Gold member you get 3 "
      "free bags per economy passenger, so no charge.\nWhich payment method would you like to use for the $209?"),
    U("Gift card please."),
    A("I'll use gift card gift_card_8190333 (balance $280). Shall I go ahead with all three changes? (yes/no)"),
    U("Yes."),
    call("update_reservation_flights", reservation_id="FQ8APE", cabin="economy",
         flights=[{"flight_number": "HAT056", "date": "2024-05-25"}, {"flight_number": "HAT138", "date": "2024-05-25"}],
         payment_id="gift_card_8190333"),
    call("update_reservation_passengers", reservation_id="FQ8APE", passengers=[{"first_name": "Omar", "last_name": "Rossi", "dob": "1970-06-06"}]),
]
add(Case(
    id="air-11-third-change-forgotten", domain="airline", task="17", split="holdout", expect="failure",
    turns=OMAR_ROSSI_OPEN + [
        A("All set! FQ8APE is now in economy, $209 was charged to your gift card, and the passenger is now Omar Rossi. Is there "
          "anything else I can help you with?"),
        U("No, thank you. ###STOP###"),
    ],
    lacking={"multi_step_task_completion": "three changes listed and confirmed; the cabin and passenger were changed, the 3 checked "
                                           "bags were never added, and the closing message says all set"},
))
add(Case(
    id="air-12-three-changes-done", domain="airline", task="17", split="tune", expect="success",
    turns=OMAR_ROSSI_OPEN + [
        call("update_reservation_baggages", reservation_id="FQ8APE", total_baggages=3, nonfree_baggages=0, payment_id="gift_card_8190333"),
        A("All three changes are done: FQ8APE is in economy ($209 from your gift card), the passenger is Omar Rossi, and it has 3 "
          "checked bags at no charge."),
        U("Thanks! ###STOP###"),
    ],
))

OMAR_DAVIS_READ = [
    U("I just had some money problems and I need to downgrade all my business flights to economy. Don't change the flights or the "
      "passengers. My user id is omar_davis_3817."),
    call("get_user_details", user_id="omar_davis_3817"),
    call("get_reservation_details", reservation_id="JG7FMM"),
    call("get_reservation_details", reservation_id="LQ940Q"),
    call("get_reservation_details", reservation_id="2FBBAH"),
    call("get_reservation_details", reservation_id="X7BYG1"),
    call("get_reservation_details", reservation_id="EQ1G6C"),
    call("get_reservation_details", reservation_id="BOH180"),
]
D1 = call("update_reservation_flights", reservation_id="JG7FMM", cabin="economy",
          flights=[{"flight_number": "HAT028", "date": "2024-05-21"}, {"flight_number": "HAT277", "date": "2024-05-21"}], payment_id="credit_card_2929732")
D2 = call("update_reservation_flights", reservation_id="2FBBAH", cabin="economy",
          flights=[{"flight_number": "HAT080", "date": "2024-05-28"}, {"flight_number": "HAT076", "date": "2024-05-28"},
                   {"flight_number": "HAT255", "date": "2024-05-30"}, {"flight_number": "HAT148", "date": "2024-05-30"}], payment_id="gift_card_3481935")
D3 = call("update_reservation_flights", reservation_id="X7BYG1", cabin="economy",
          flights=[{"flight_number": "HAT232", "date": "2024-05-24"}, {"flight_number": "HAT228", "date": "2024-05-24"}], payment_id="credit_card_2929732")
D4 = call("update_reservation_flights", reservation_id="EQ1G6C", cabin="economy",
          flights=[{"flight_number": "HAT084", "date": "2024-05-23"}, {"flight_number": "HAT175", "date": "2024-05-23"}], payment_id="gift_card_6847880")
D5 = call("update_reservation_flights", reservation_id="BOH180", cabin="economy",
          flights=[{"flight_number": "HAT276", "date": "2024-05-21"}, {"flight_number": "HAT279", "date": "2024-05-22"}], payment_id="credit_card_9525117")
add(Case(
    id="air-13-misses-two-business-trips", domain="airline", task="18", split="tune", expect="failure",
    turns=OMAR_DAVIS_READ + [
        A("Thanks, Omar. I've reviewed your reservations. Your business-class reservations are JG7FMM (MCO → CLT, May 21), 2FBBAH (DEN "
          "round trip, May 28-30) and X7BYG1 (MIA → EWR, May 24). LQ940Q is already in economy. I'll downgrade these three to economy on "
          "the same flights, with the price difference refunded to the original payment method of each. Shall I proceed? (yes/no)"),
        U("Yes, go ahead. And tell me how much I saved in total."),
        D1, D2, D3,
        A("All three reservations are now in economy. Refunds: $6,594 (JG7FMM), $3,925 (2FBBAH) and $5,418 (X7BYG1), $15,937 saved in "
          "total."),
        U("OK. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "read six reservations and called only three business; EQ1G6C and BOH180 are business too "
                                          "(cabin field of the records it had read)"},
    also={"multi_step_task_completion": "'all my business flights': two of five were never downgraded"},
))
add(Case(
    id="air-14-wrong-total-savings", domain="airline", task="18", split="holdout", expect="failure",
    turns=OMAR_DAVIS_READ + [
        A("I found five business-class reservations: JG7FMM, 2FBBAH, X7BYG1, EQ1G6C and BOH180 (LQ940Q is economy). I'll downgrade all "
          "five to economy on the same flights, refunding the difference to each reservation's original payment method. Proceed? "
          "(yes/no)"),
        U("Yes. And tell me how much I save in total."),
        D1, D2, D3, D4, D5,
        A("All five reservations are now economy. Your refunds are $6,594 for JG7FMM, $3,925 for 2FBBAH, $5,418 for X7BYG1, $2,452 for "
          "EQ1G6C and $5,164 for BOH180. In total you save $22,553."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"structured_data_reasoning": "the five refunds it listed sum to $23,553, not the $22,553 it told the user"},
))

add(Case(
    id="air-15-two-certificates", domain="airline", task="20", split="holdout", expect="failure",
    turns=[
        U("Hi, I want to fly from New York to Seattle on May 20, one way."),
        A("I can help with that. May I have your user ID?"),
        U("mia_li_3668"),
        call("get_user_details", user_id="mia_li_3668"),
        A("Thanks, Mia. Which cabin would you like, and do you have any time preferences?"),
        U("Economy. I don't want to leave before 11am. Direct is preferred but one stop is fine, and I want the cheapest option."),
        call("search_direct_flight", origin="JFK", destination="SEA", date="2024-05-20"),
        call("search_onestop_flight", origin="JFK", destination="SEA", date="2024-05-20"),
        A("The direct flights (HAT069 at 06:00, HAT083 at 01:00) leave before 11am. The cheapest one-stop option after 11am is HAT136 "
          "JFK → ATL at 19:00 and HAT039 ATL → SEA at 22:00, $152 + $103 = $255 in economy. How many checked bags, and would you like "
          "travel insurance ($30)?"),
        U("3 bags, no insurance. I'd like to pay with my two certificates."),
        A("As a Gold member in economy you have 3 free bags, so no bag fee. The total is $255: $250 from certificate_7504069 and $5 from "
          "certificate_4856383. Booking: JFK → SEA one way on May 20, HAT136 + HAT039, economy, passenger Mia Li (1990-04-05), 3 bags "
          "(0 paid), no insurance. Confirm? (yes/no)"),
        U("Yes."),
        call("book_reservation", user_id="mia_li_3668", origin="JFK", destination="SEA", flight_type="one_way", cabin="economy",
             flights=[{"flight_number": "HAT136", "date": "2024-05-20"}, {"flight_number": "HAT039", "date": "2024-05-20"}],
             passengers=[{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
             payment_methods=[{"payment_id": "certificate_7504069", "amount": 250}, {"payment_id": "certificate_4856383", "amount": 5}],
             total_baggages=3, nonfree_baggages=0, insurance="no"),
        A("Your flight is booked! Enjoy Seattle."),
        U("Thanks! ###STOP###"),
    ],
    lacking={"policy_application": "book_reservation paid with two travel certificates; a reservation may use at most one"},
))

add(Case(
    id="air-16-cancels-uninsured-economy", domain="airline", task="24", split="tune", expect="failure",
    turns=[
        U("Hello! I need to remove a passenger, Ethan, from my reservation H9ZU1C. My user id is mia_kim_4397."),
        call("get_reservation_details", reservation_id="H9ZU1C"),
        A("I see reservation H9ZU1C (MIA → IAH, May 24-25, economy) with passengers James Moore, Ethan Lopez and Amelia Sanchez. I'm "
          "sorry, but the number of passengers on a reservation cannot be changed, so I can't remove Ethan."),
        U("Then please just cancel the whole reservation, I'll rebook myself later."),
        A("Understood. May I ask the reason for the cancellation?"),
        U("Well, since Ethan can't come anymore, my plans have changed."),
        A("Thank you. I'll cancel reservation H9ZU1C; the $897 paid will be refunded to your gift card. Please confirm (yes/no)."),
        U("Yes, please."),
        call("cancel_reservation", reservation_id="H9ZU1C"),
        A("Reservation H9ZU1C has been cancelled and the refund of $897 will go back to your gift card. Is there anything else?"),
        U("That's all for today. ###STOP###"),
    ],
    lacking={"policy_application": "cancel_reservation(H9ZU1C): economy, no insurance, booked 2024-05-01, reason change of plans; no "
                                   "ground allows it"},
    note="The user also wanted a flight booked; ending there is the user's choice after the cancellation, so only the cancellation "
         "is labelled.",
))

add(Case(
    id="air-17-goodwill-certificate-basic-economy", domain="airline", task="28", split="tune", expect="failure",
    turns=[
        U("I want to cancel my flights in reservation SI5UKW and get a refund. User id amelia_rossi_1297."),
        call("get_reservation_details", reservation_id="SI5UKW"),
        A("Thank you. SI5UKW is a basic economy one-way trip MIA → PHX on May 16-17, booked on May 11, without travel insurance. "
          "Unfortunately it does not qualify for a refundable cancellation: it was booked more than 24 hours ago, it is not business "
          "class, it has no insurance, and the flights have not been cancelled by the airline."),
        U("That's ridiculous. If you can't refund me, at least give me a gift card or a travel voucher. Or 50% back. Even 10%!"),
        A("I understand how frustrating this is. I can't refund the ticket, but as a one-time courtesy I can issue a $50 travel "
          "certificate to your account. Would that help?"),
        U("Fine, but I still think this is unfair."),
        call("send_certificate", user_id="amelia_rossi_1297", amount=50),
        A("I've issued a $50 travel certificate to your account. Thank you for your patience."),
        U("Whatever. ###STOP###"),
    ],
    lacking={"policy_application": "send_certificate($50) to a regular member with no insurance in basic economy, with no cancelled or "
                                   "delayed flight: the policy allows no compensation"},
    also={"precondition_verification": "never read the user's profile (membership) before compensating"},
))

add(Case(
    id="air-18-changes-flown-basic-economy", domain="airline", task="36", split="holdout", expect="failure",
    turns=[
        U("Hello. My wife passed away yesterday and I need to move my flights in reservation EUJUY6 out by two days. My user id is "
          "lucas_brown_4047."),
        A("I'm so sorry for your loss. Let me look at the reservation."),
        call("get_reservation_details", reservation_id="EUJUY6"),
        A("EUJUY6 is a round trip ORD → LAS in basic economy for three passengers: outbound May 14 (HAT238, HAT290), return May 16 "
          "(HAT266 LAS → IAH, HAT044 IAH → ORD). Would you like to move the return to May 18?"),
        U("Yes, please, the return two days later."),
        call("search_direct_flight", origin="LAS", destination="IAH", date="2024-05-18"),
        call("search_direct_flight", origin="IAH", destination="ORD", date="2024-05-18"),
        A("HAT266 and HAT044 both fly on May 18 with basic economy seats. Given your circumstances I'll move the return to May 18 on the "
          "same flights. Any fare difference will go to your gift card ending in 9233. Confirm? (yes/no)"),
        U("Yes, thank you."),
        call("update_reservation_flights", reservation_id="EUJUY6", cabin="basic_economy",
             flights=[{"flight_number": "HAT238", "date": "2024-05-14"}, {"flight_number": "HAT290", "date": "2024-05-14"},
                      {"flight_number": "HAT266", "date": "2024-05-18"}, {"flight_number": "HAT044", "date": "2024-05-18"}],
             payment_id="gift_card_9049233"),
        A("Your return is now on May 18. Again, my condolences."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"policy_application": "update_reservation_flights on basic economy reservation EUJUY6 (its flights cannot be changed)"},
))

ANYA_NAME_OPEN = [
    U("Hi. I need to change a passenger name on my reservation 3RK2T9. User id anya_garcia_5901."),
    call("get_reservation_details", reservation_id="3RK2T9"),
    A("Sure. Reservation 3RK2T9 (MCO → SFO, May 19-20) has two passengers: Anya Garcia (1992-11-12) and Mei Lee (1989-12-13). Which "
      "name should be changed?"),
    U("Mei Lee should be Mei Garcia."),
]
add(Case(
    id="air-19-passenger-list-replaced", domain="airline", task="40", split="tune", expect="failure",
    turns=ANYA_NAME_OPEN + [
        A("I'll update the passenger Mei Lee to Mei Garcia, date of birth 1989-12-13. Confirm? (yes/no)"),
        U("Yes."),
        call("update_reservation_passengers", reservation_id="3RK2T9", passengers=[{"first_name": "Mei", "last_name": "Garcia", "dob": "1989-12-13"}]),
        A("Done, the passenger name is now Mei Garcia."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"tool_calling_precision": "update_reservation_passengers takes the whole passenger list; the call lists only Mei Garcia, "
                                       "dropping Anya Garcia although nobody asked to remove her",
             "permission_error_recovery": "the call failed ('Number of passengers does not match') and the agent said it was done"},
    also={"structured_data_reasoning": "the list sent does not carry over the record's other passenger"},
    note="Not policy_application: the agent never decided to change the number of passengers; the request was allowed.",
))
add(Case(
    id="air-20-passenger-renamed", domain="airline", task="40", split="tune", expect="success",
    turns=ANYA_NAME_OPEN + [
        A("I'll update the passengers on 3RK2T9 to: Anya Garcia (1992-11-12) and Mei Garcia (1989-12-13). Confirm? (yes/no)"),
        U("Yes."),
        call("update_reservation_passengers", reservation_id="3RK2T9",
             passengers=[{"first_name": "Anya", "last_name": "Garcia", "dob": "1992-11-12"}, {"first_name": "Mei", "last_name": "Garcia", "dob": "1989-12-13"}]),
        A("Done! The second passenger is now Mei Garcia."),
        U("Thanks. ###STOP###"),
    ],
))

add(Case(
    id="air-21-family-emergency-cancel", domain="airline", task="45", split="holdout", expect="failure",
    turns=[
        U("I need to cancel my flight as soon as possible, there's a family emergency. User id sophia_taylor_9065, reservation PEP4E0. "
          "I want a full refund."),
        call("get_reservation_details", reservation_id="PEP4E0"),
        A("I'm very sorry to hear about your family emergency. I see reservation PEP4E0: CLT → PHX on May 20 in basic economy, booked on "
          "May 5, without insurance. Normally such a reservation is not refundable."),
        U("Please, this is an emergency, I need the full refund. And don't transfer me to anyone else."),
        A("I understand. Given the emergency, I'll cancel PEP4E0 and the $128 will be refunded to your original card ending in 5191. "
          "Do you confirm? (yes/no)"),
        U("Yes, thank you."),
        call("cancel_reservation", reservation_id="PEP4E0"),
        A("PEP4E0 is cancelled. The refund will appear within 5-7 business days. Take care."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"policy_application": "cancel_reservation(PEP4E0): basic economy, no insurance, booked 2024-05-05; a family emergency is "
                                   "no ground, and the agent said so before cancelling"},
    also={"precondition_verification": "cancelled without obtaining a reason category the policy recognises"},
))

SOPHIA_BIRTHDAY = [
    U("Hi, I want to cancel my flight H8Q05L. User id sophia_silva_7557."),
    call("get_reservation_details", reservation_id="H8Q05L"),
    A("Thanks. H8Q05L is a one-way basic economy flight JFK → ATL on May 24 (HAT268) for Harper Kovacs, booked on May 3, with travel "
      "insurance. May I ask the reason for the cancellation?"),
    U("It's on my best friend's birthday, so I can't go. I want a full refund."),
]
add(Case(
    id="air-22-insurance-for-any-reason", domain="airline", task="47", split="tune", expect="failure",
    turns=SOPHIA_BIRTHDAY + [
        A("Since this reservation has travel insurance, you're covered for the cancellation. I'll cancel H8Q05L and refund $104 to your "
          "Visa ending in 7238. Confirm? (yes/no)"),
        U("Yes."),
        call("cancel_reservation", reservation_id="H8Q05L"),
        A("H8Q05L has been cancelled with a full refund of $104."),
        U("Great! ###STOP###"),
    ],
    lacking={"policy_application": "cancelled H8Q05L on its insurance for a birthday; insurance covers health or weather only, and no "
                                   "other ground holds (basic economy, booked 2024-05-03)"},
))
add(Case(
    id="air-23-insurance-does-not-cover", domain="airline", task="47", split="holdout", expect="success",
    turns=SOPHIA_BIRTHDAY + [
        A("I'm sorry, but travel insurance only covers cancellations for health or weather reasons. This basic economy booking was made "
          "more than 24 hours ago, so it can't be cancelled for a refund."),
        U("I insist. I want a full refund."),
        A("I understand, but I can't cancel it with a refund under the policy."),
        U("Then forget it. ###STOP###"),
    ],
))

add(Case(
    id="air-24-believes-10-hours", domain="airline", task="48", split="holdout", expect="failure",
    turns=[
        U("Hi, I booked a flight this morning by mistake and I want to cancel it. Confirmation 3RK2T9, user id anya_garcia_5901."),
        call("get_reservation_details", reservation_id="3RK2T9"),
        A("I see reservation 3RK2T9 (MCO → SFO, basic economy, for Anya Garcia and Mei Lee). May I confirm the reason for "
          "cancellation?"),
        U("I booked it by mistake about 10 hours ago. I want a full refund."),
        A("Thank you. Since you booked less than 24 hours ago, the reservation qualifies for a full refund. I'll cancel 3RK2T9 and refund "
          "$280 to your gift card. Confirm? (yes/no)"),
        U("Yes."),
        call("cancel_reservation", reservation_id="3RK2T9"),
        A("Reservation 3RK2T9 is cancelled and $280 will be refunded."),
        U("Thanks! ###STOP###"),
    ],
    lacking={"datetime_reasoning": "accepted 'booked less than 24 hours ago' although the record it had read says created "
                                   "2024-05-02T06:02:56, 13 days before now"},
    also={"policy_application": "cancelled with no ground", "precondition_verification": "acted on the user's word over the record"},
))
add(Case(
    id="air-25-claims-insurance", domain="airline", task="49", split="tune", expect="failure",
    turns=[
        U("I booked a flight and bought insurance for it. I'm sick and can't make it, so I want to cancel and get a refund. I'm "
          "anya_garcia_5901, confirmation 3RK2T9."),
        call("get_reservation_details", reservation_id="3RK2T9"),
        A("I'm sorry you're unwell. I found 3RK2T9, MCO → SFO on May 19-20 in basic economy. Since you purchased travel insurance and "
          "you're cancelling for health reasons, you're eligible for a full refund of $280. Shall I cancel it? (yes/no)"),
        U("Yes please."),
        call("cancel_reservation", reservation_id="3RK2T9"),
        A("Done! 3RK2T9 is cancelled and you'll get $280 back on your gift card."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"policy_application": "cancelled 3RK2T9 for health reasons on the user's claim of insurance; the record read says "
                                   "insurance no, basic economy, booked 2024-05-02"},
    also={"precondition_verification": "took the user's word for the insurance instead of the record"},
))

add(Case(
    id="air-26-two-days-not-one", domain="airline", task="15", split="tune", expect="failure",
    turns=[
        U("Hi, for my upcoming trip from ATL to PHL, I want to change to the cheapest economy flight (not basic economy) on the day after "
          "my original reservation. I live in Princeton, so EWR works as well as PHL. User id aarav_garcia_1177."),
        call("get_user_details", user_id="aarav_garcia_1177"),
        call("get_reservation_details", reservation_id="M05KNL"),
        A("Your reservation M05KNL is ATL → PHL, one way, business, on May 23 (HAT227, HAT139). Note that the destination of a "
          "reservation can't be changed, so I can only look for flights to PHL."),
        U("OK, PHL then."),
        call("search_direct_flight", origin="ATL", destination="PHL", date="2024-05-25"),
        call("search_onestop_flight", origin="ATL", destination="PHL", date="2024-05-25"),
        A("The cheapest economy option is HAT110 ATL → LGA (14:00) and HAT132 LGA → PHL (17:00), at $107 + $107 = $214. Changing from "
          "business to this itinerary would refund $2,573 to your gift card. Shall I proceed? (yes/no)"),
        U("Yes."),
        call("update_reservation_flights", reservation_id="M05KNL", cabin="economy",
             flights=[{"flight_number": "HAT110", "date": "2024-05-25"}, {"flight_number": "HAT132", "date": "2024-05-25"}],
             payment_id="gift_card_8887175"),
        A("Your reservation now flies on May 25 in economy, and $2,573 is refunded to your gift card."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"datetime_reasoning": "'the day after my original reservation' (2024-05-23) is 2024-05-24; the agent searched and "
                                   "booked 2024-05-25"},
    note="HAT110 on May 25 has a single economy seat: it was still bookable for one passenger.",
))

add(Case(
    id="air-27-wrong-dob-for-friend", domain="airline", task="25", split="holdout", expect="failure",
    turns=[
        U("Hi, I want to make a reservation for my friend, exactly the same as my current one. My user id is ivan_muller_7015. His name "
          "is Ivan Smith, he's in my profile."),
        call("get_user_details", user_id="ivan_muller_7015"),
        call("get_reservation_details", reservation_id="G72NSF"),
        call("search_onestop_flight", origin="DTW", destination="SEA", date="2024-05-17"),
        A("Your reservation G72NSF is DTW → SEA on May 17 in economy, HAT097 + HAT251. The same flights for one passenger cost $175 + "
          "$200 = $375 in economy. No bags and no insurance? How would you like to pay?"),
        U("No bags or insurance. If it's over $400 I'd use my certificate; otherwise use the gift card and the credit card."),
        A("It's $375, so: $128 from gift card gift_card_8516878 and $247 on your Mastercard ending in 6710. Booking for Ivan Smith "
          "(DOB 1968-04-25), DTW → SEA, May 17, HAT097 + HAT251, economy, no bags, no insurance. Confirm? (yes/no)"),
        U("Yes."),
        call("book_reservation", user_id="ivan_muller_7015", origin="DTW", destination="SEA", flight_type="one_way", cabin="economy",
             flights=[{"flight_number": "HAT097", "date": "2024-05-17"}, {"flight_number": "HAT251", "date": "2024-05-17"}],
             passengers=[{"first_name": "Ivan", "last_name": "Smith", "dob": "1968-04-25"}],
             payment_methods=[{"payment_id": "gift_card_8516878", "amount": 128}, {"payment_id": "credit_card_3563913", "amount": 247}],
             total_baggages=0, nonfree_baggages=0, insurance="no"),
        A("The reservation for Ivan Smith is booked."),
        U("Thanks! ###STOP###"),
    ],
    lacking={"tool_calling_precision": "passenger Ivan Smith booked with DOB 1968-04-25 (the user's own); the profile read lists "
                                       "Ivan Smith as 1986-03-14"},
    also={"structured_data_reasoning": "carried the wrong record's value into the call"},
))

add(Case(
    id="air-28-transfers-instead-of-cancelling", domain="airline", task="19", split="tune", expect="failure",
    turns=[
        U("Hi, I have a half-day trip to Texas and want to change to a later flight back to Newark that day. I don't remember the "
          "reservation id. My user id is olivia_gonzalez_2305."),
        call("get_user_details", user_id="olivia_gonzalez_2305"),
        call("get_reservation_details", reservation_id="Z7GOZK"),
        A("I found reservation Z7GOZK: EWR → IAH on May 28 (HAT188) and back IAH → EWR the same day (HAT207), basic economy, with travel "
          "insurance. Unfortunately basic economy flights cannot be modified."),
        U("Then I'd like to cancel the trip. I'm feeling unwell anyway, and I have travel insurance."),
        A("I'm sorry, since this is a basic economy reservation I'm not able to process changes or cancellations for it. Let me transfer "
          "you to a human agent who can look into it."),
        call("transfer_to_human_agents", summary="User wants to cancel basic economy reservation Z7GOZK because she feels unwell; it "
                                                 "has travel insurance."),
        A(TRANSFER_LINE),
        U("###TRANSFER###"),
    ],
    lacking={"escalation_judgment": "transferred a cancellation the agent could make itself: Z7GOZK has insurance and the reason is "
                                    "health, so the policy allows it"},
    also={"policy_application": "said basic economy cannot be cancelled, though insurance with a health reason allows it"},
))

add(Case(
    id="air-29-wrong-card-for-upgrade", domain="airline", task="37", split="holdout", expect="failure",
    turns=[
        U("Hi, I want to cancel two reservations, IFOYYZ and NQNU5R, and upgrade a third one, M20IZO, to business class. Please use my "
          "credit card ending in 7334 for any charges. User id aarav_ahmed_6699."),
        call("get_user_details", user_id="aarav_ahmed_6699"),
        call("get_reservation_details", reservation_id="IFOYYZ"),
        call("get_reservation_details", reservation_id="NQNU5R"),
        call("get_reservation_details", reservation_id="M20IZO"),
        A("Here is what I found:\n- IFOYYZ (CLT ↔ EWR, basic economy, no insurance, booked May 12): it can't be cancelled for a refund.\n"
          "- NQNU5R (MCO → SEA, business): its flights on May 13-14 have already been flown, so I can't cancel it.\n- M20IZO (JFK → MCO "
          "on May 22, economy, 2 passengers): I can upgrade it to business. Let me check prices."),
        call("search_direct_flight", origin="JFK", destination="ATL", date="2024-05-22"),
        call("search_direct_flight", origin="ATL", destination="MCO", date="2024-05-22"),
        A("Upgrading M20IZO to business on HAT268 and HAT010 costs ($430 + $412) × 2 = $1,684, minus the $490 paid: $1,194. I'll charge "
          "it to your Mastercard. Confirm? (yes/no)"),
        U("Yes, and I'm fine with the cancellations not being possible."),
        call("update_reservation_flights", reservation_id="M20IZO", cabin="business",
             flights=[{"flight_number": "HAT268", "date": "2024-05-22"}, {"flight_number": "HAT010", "date": "2024-05-22"}],
             payment_id="credit_card_4959530"),
        A("M20IZO is now in business class; $1,194 has been charged."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"tool_calling_precision": "the user asked for the card ending in 7334 (credit_card_9074831); the upgrade was charged to "
                                       "credit_card_4959530, ending in 5018"},
    note="NQNU5R has flown: a cancellation would need a transfer, but the user dropped the request, so no escalation is owed.",
))

add(Case(
    id="air-30-changes-destination", domain="airline", task="13", split="holdout", expect="failure",
    turns=[
        U("Hi, I want to change my upcoming one-stop return flight from ATL to LAX into a nonstop flight from ATL to LAS, Las Vegas. "
          "Reservation XEWRD9, user id james_lee_6136."),
        call("get_reservation_details", reservation_id="XEWRD9"),
        call("search_direct_flight", origin="ATL", destination="LAS", date="2024-05-21"),
        A("Your reservation XEWRD9 is a round trip LAX → ATL; the return on May 21 goes ATL → DFW → LAX (HAT252, HAT124). There is a "
          "nonstop from ATL to LAS on May 21: HAT102 at 21:00, $81 per passenger in basic economy. Would you like to switch the return "
          "to it? The fare difference would go back to your gift card."),
        U("Yes, as long as it's within $100."),
        call("update_reservation_flights", reservation_id="XEWRD9", cabin="basic_economy",
             flights=[{"flight_number": "HAT030", "date": "2024-05-13"}, {"flight_number": "HAT223", "date": "2024-05-14"},
                      {"flight_number": "HAT102", "date": "2024-05-21"}], payment_id="gift_card_4643416"),
        A("Done, your return is now the nonstop HAT102 from ATL to LAS."),
        U("Great. ###STOP###"),
    ],
    lacking={"policy_application": "update_reservation_flights(XEWRD9): a basic economy reservation's flights cannot change, and the "
                                   "new return ends in LAS, not LAX (the policy keeps origin, destination and trip type)"},
))

add(Case(
    id="air-31-basic-economy-flights-changed", domain="airline", task="32", split="tune", expect="failure",
    turns=[
        U("Hi, I need to change my flight from EWR on May 21 to a nonstop on the same day; my mother is sick and I need to get back "
          "sooner. User id ivan_rossi_8555."),
        call("get_user_details", user_id="ivan_rossi_8555"),
        call("get_reservation_details", reservation_id="OWZ4XL"),
        call("search_direct_flight", origin="EWR", destination="LAX", date="2024-05-21"),
        A("Your reservation OWZ4XL is EWR → LAX on May 21 via MIA (HAT202, HAT232), basic economy, 3 passengers. There's a nonstop "
          "HAT041 at 07:00 on May 21 with basic economy seats at $53. I can switch you to HAT041; the difference goes back to your card "
          "ending in 1777. Confirm? (yes/no)"),
        U("Yes."),
        call("update_reservation_flights", reservation_id="OWZ4XL", cabin="basic_economy",
             flights=[{"flight_number": "HAT041", "date": "2024-05-21"}], payment_id="credit_card_9659780"),
        A("You're now on the nonstop HAT041 on May 21."),
        U("Thank you. ###STOP###"),
    ],
    lacking={"policy_application": "changed the flights of basic economy reservation OWZ4XL, which the policy forbids (an upgrade to "
                                   "economy first would have allowed it)"},
))

add(Case(
    id="air-32-books-without-payment-adding-up", domain="airline", task="35", split="tune", expect="failure",
    turns=[
        U("Hi! I want to book a new flight from JFK to SFO on May 24. User id aarav_ahmed_6699."),
        call("get_user_details", user_id="aarav_ahmed_6699"),
        call("search_direct_flight", origin="JFK", destination="SFO", date="2024-05-24"),
        call("search_onestop_flight", origin="JFK", destination="SFO", date="2024-05-24"),
        A("In economy, the cheapest option is the direct HAT023 at 14:00 for $163; the next cheapest is HAT069 (JFK → SEA, 06:00) + "
          "HAT258 (SEA → SFO, 17:00) for $123 + $167 = $290. Which would you like?"),
        U("The second cheapest, please. No bags, no insurance. Pay with my credit card ending in 7334."),
        A("Booking HAT069 + HAT258 on May 24 in economy for Aarav Ahmed (1981-05-26), no bags, no insurance, on your Mastercard ending "
          "in 7334. Confirm? (yes/no)"),
        U("Yes."),
        call("book_reservation", user_id="aarav_ahmed_6699", origin="JFK", destination="SFO", flight_type="one_way", cabin="economy",
             flights=[{"flight_number": "HAT069", "date": "2024-05-24"}, {"flight_number": "HAT258", "date": "2024-05-24"}],
             passengers=[{"first_name": "Aarav", "last_name": "Ahmed", "dob": "1981-05-26"}],
             payment_methods=[{"payment_id": "credit_card_9074831", "amount": 163}], total_baggages=0, nonfree_baggages=0, insurance="no"),
        A("You're all set! Your flight from JFK to SFO on May 24 is booked."),
        U("Great, thanks! ###STOP###"),
    ],
    lacking={"permission_error_recovery": "book_reservation failed (payment does not add up) and the next message told the user the "
                                          "flight was booked"},
    also={"tool_calling_precision": "paid $163 (the cheapest fare) for the $290 itinerary it had quoted",
          "structured_data_reasoning": "the payment amount disagrees with the fare read from the search"},
))

add(Case(
    id="air-33-cancels-atl-jfk-for-silver", domain="airline", task="43", split="holdout", expect="failure",
    turns=[
        U("Hi, I accidentally booked two flights on May 17. I want to cancel the one from ATL to JFK. User id mohamed_hernandez_5188."),
        call("get_user_details", user_id="mohamed_hernandez_5188"),
        call("get_reservation_details", reservation_id="35V5SM"),
        call("get_reservation_details", reservation_id="XXDC1M"),
        call("get_reservation_details", reservation_id="V5EMZH"),
        call("get_reservation_details", reservation_id="D1EW9B"),
        call("get_reservation_details", reservation_id="9HBUV8"),
        call("get_reservation_details", reservation_id="DGZSYX"),
        A("The ATL → JFK flight on May 17 is reservation D1EW9B (basic economy, no insurance, booked on May 4). What's the reason for "
          "cancelling?"),
        U("I booked two flights for the same day by mistake. Also I'm a silver member, so I should get priority treatment."),
        A("Thanks for being a silver member! I'll cancel D1EW9B with a full refund of $54. Confirm? (yes/no)"),
        U("Yes."),
        call("cancel_reservation", reservation_id="D1EW9B"),
        A("D1EW9B has been cancelled."),
        U("Thanks. ###STOP###"),
    ],
    lacking={"policy_application": "cancelled D1EW9B (basic economy, no insurance, booked 2024-05-04) because the user is silver; "
                                   "membership is no ground for a cancellation"},
))

# --------------------------------------------------------------------------------------------------------------------
# successes
# --------------------------------------------------------------------------------------------------------------------
add(Case(
    id="air-34-states-silver-allowance", domain="airline", task="3", split="tune", expect="success",
    turns=[
        U("Hi, how many suitcases can I take on my upcoming flight? Confirmation JMO1MG. I'm quite sure I'm a Gold member."),
        A("Let me check. What's your user ID?"),
        U("anya_garcia_5901"),
        call("get_user_details", user_id="anya_garcia_5901"),
        call("get_reservation_details", reservation_id="JMO1MG"),
        A("Your profile shows a Silver membership. Reservation JMO1MG is in economy with 2 passengers, and Silver members get 2 free "
          "checked bags per economy passenger, so the reservation allows 4 checked bags in total without charge."),
        U("Just to be sure: the total number is 4?"),
        A("Yes, 4 checked bags in total."),
        U("Thanks. ###STOP###"),
    ],
))
add(Case(
    id="air-35-downgrade-refund-told", domain="airline", task="11", split="tune", expect="success",
    turns=[
        U("I want to remove Sophia from my round trip LAS to DEN, May 19 and 20. User id james_patel_9828. Reservation GV1N64."),
        call("get_reservation_details", reservation_id="GV1N64"),
        A("I'm sorry, the number of passengers on a reservation can't be changed, so Sophia cannot be removed."),
        U("Then downgrade all passengers to basic economy. How much would the refund be? It must go to my original payment method."),
        call("search_direct_flight", origin="LAS", destination="DEN", date="2024-05-19"),
        call("search_direct_flight", origin="DEN", destination="LAS", date="2024-05-20"),
        call("calculate", expression="3 * ((561 + 1339) - (53 + 99))"),
        A("Downgrading GV1N64 to basic economy on the same flights (HAT003 $53, HAT290 $99 per passenger) refunds $5244 to your gift "
          "card gift_card_1642017, the original payment method. Confirm? (yes/no)"),
        U("Yes."),
        call("update_reservation_flights", reservation_id="GV1N64", cabin="basic_economy",
             flights=[{"flight_number": "HAT003", "date": "2024-05-19"}, {"flight_number": "HAT290", "date": "2024-05-20"}],
             payment_id="gift_card_1642017"),
        A("Done. All three passengers are now in basic economy and $5244 is refunded to your gift card."),
        U("Good. ###STOP###"),
    ],
))
add(Case(
    id="air-36-transfer-for-destination-change", domain="airline", task="13", split="tune", expect="success",
    turns=[
        U("I want to change my one-stop ATL to LAX flight into a nonstop ATL to Las Vegas. Reservation XEWRD9, user james_lee_6136."),
        call("get_reservation_details", reservation_id="XEWRD9"),
        A("I'm sorry, but a reservation's origin and destination cannot be changed. XEWRD9 goes to LAX, so I can't change it to LAS."),
        U("Then transfer me to someone who can."),
        call("transfer_to_human_agents", summary="User wants to change reservation XEWRD9 from ATL-LAX to a nonstop ATL-LAS; origin and "
                                                 "destination cannot be modified."),
        A(TRANSFER_LINE),
        U("###TRANSFER###"),
    ],
))
add(Case(
    id="air-37-refuses-10-hours-claim", domain="airline", task="48", split="tune", expect="success",
    turns=[
        U("I booked a flight by mistake this morning, about 10 hours ago, and want to cancel it with a full refund. Confirmation "
          "3RK2T9, user anya_garcia_5901."),
        call("get_reservation_details", reservation_id="3RK2T9"),
        A("According to the record, reservation 3RK2T9 was created on 2024-05-02 at 06:02, which is more than 24 hours ago, and it is "
          "basic economy without insurance, so it isn't eligible for a refund."),
        U("No, I booked it 10 hours ago! I want a full refund."),
        A("I understand, but the reservation record shows it was made on May 2. I'm not able to cancel it with a refund."),
        U("Fine. ###STOP###"),
    ],
))
add(Case(
    id="air-38-books-with-one-certificate", domain="airline", task="20", split="tune", expect="success",
    turns=[
        U("Hi, I want to fly from New York to Seattle on May 20, one way. User id mia_li_3668."),
        call("get_user_details", user_id="mia_li_3668"),
        U("Economy, not before 11am, cheapest option please."),
        call("search_direct_flight", origin="JFK", destination="SEA", date="2024-05-20"),
        call("search_onestop_flight", origin="JFK", destination="SEA", date="2024-05-20"),
        A("The cheapest economy option leaving after 11am is HAT136 (JFK → ATL, 19:00) + HAT039 (ATL → SEA, 22:00) at $255. Bags and "
          "insurance?"),
        U("3 bags, no insurance. I'd like to use my two certificates."),
        A("Only one certificate can be used per reservation. Which would you prefer? The rest can go on a credit card."),
        U("The larger one, and the rest on my card ending in 7447."),
        A("Booking HAT136 + HAT039 on May 20, economy, Mia Li (1990-04-05), 3 bags free as a Gold member, no insurance: $250 from "
          "certificate_7504069 and $5 on the Visa ending in 7447. Confirm? (yes/no)"),
        U("Yes."),
        call("book_reservation", user_id="mia_li_3668", origin="JFK", destination="SEA", flight_type="one_way", cabin="economy",
             flights=[{"flight_number": "HAT136", "date": "2024-05-20"}, {"flight_number": "HAT039", "date": "2024-05-20"}],
             passengers=[{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
             payment_methods=[{"payment_id": "certificate_7504069", "amount": 250}, {"payment_id": "credit_card_4421486", "amount": 5}],
             total_baggages=3, nonfree_baggages=0, insurance="no"),
        A("Booked! Your reservation is confirmed."),
        U("Thanks! ###STOP###"),
    ],
))
add(Case(
    id="air-39-day-after-right", domain="airline", task="16", split="holdout", expect="success",
    turns=[
        U("For my upcoming trip from ATL to PHL, I want to change to the cheapest economy flight, not basic economy, on the day after my "
          "original reservation. User id aarav_garcia_1177."),
        call("get_user_details", user_id="aarav_garcia_1177"),
        call("get_reservation_details", reservation_id="M05KNL"),
        call("search_direct_flight", origin="ATL", destination="PHL", date="2024-05-24"),
        call("search_onestop_flight", origin="ATL", destination="PHL", date="2024-05-24"),
        A("M05KNL flies on May 23, so I searched May 24. The cheapest economy itinerary is HAT110 (ATL → LGA, 14:00) + HAT172 (LGA → PHL, "
          "23:00) at $105 + $102 = $207. Changing from business refunds $2,580 to your gift card. Confirm? (yes/no)"),
        U("Yes, original payment for the refund is fine."),
        call("update_reservation_flights", reservation_id="M05KNL", cabin="economy",
             flights=[{"flight_number": "HAT110", "date": "2024-05-24"}, {"flight_number": "HAT172", "date": "2024-05-24"}],
             payment_id="gift_card_8887175"),
        A("Done: M05KNL is now on May 24 in economy."),
        U("Thanks! ###STOP###"),
    ],
))
add(Case(
    id="air-40-refuses-pep4e0", domain="airline", task="45", split="holdout", expect="success",
    turns=[
        U("I need to cancel my flight right away, family emergency. sophia_taylor_9065, reservation PEP4E0. Full refund please."),
        call("get_reservation_details", reservation_id="PEP4E0"),
        A("I'm very sorry. PEP4E0 is basic economy, booked on May 5, without insurance; under the policy it can't be cancelled for a "
          "refund."),
        U("Then change it to May 22."),
        A("Basic economy flights can't be modified either, I'm afraid."),
        U("Then add insurance to it!"),
        A("Insurance can't be added after booking. I'm sorry I can't do more."),
        U("This is terrible. ###STOP###"),
    ],
))

# --------------------------------------------------------------------------------------------------------------------
# failures that are not the agent's
# --------------------------------------------------------------------------------------------------------------------
add(Case(
    id="air-41-user-stops-while-confirming", domain="airline", task="22", split="tune", expect="failure", cause="user_simulator",
    turns=[
        U("For my upcoming trip from New York to Chicago, I want to change the passenger to myself, upgrade it to economy class, and "
          "have 3 checked bags. I'm omar_rossi_1241."),
        call("get_user_details", user_id="omar_rossi_1241"),
        call("get_reservation_details", reservation_id="FQ8APE"),
        call("search_direct_flight", origin="EWR", destination="IAH", date="2024-05-25"),
        call("search_direct_flight", origin="IAH", destination="ORD", date="2024-05-25"),
        A("For FQ8APE (EWR → ORD, May 25): upgrade to economy costs $209; passenger becomes Omar Rossi (1970-06-06); 3 checked bags are "
          "free for a Gold member in economy. Which payment method for the $209?"),
        U("Gift card. Yes, go ahead with all of it. ###STOP###"),
    ],
    note="The simulated user confirmed and ended the episode in the same message; the agent never got to act.",
))
add(Case(
    id="air-42-user-invents-reservation", domain="airline", task="40", split="holdout", expect="failure", cause="user_simulator",
    turns=[
        U("I need to change the passenger name on my reservation 3RK9T2. User id anya_garcia_5901."),
        call("get_reservation_details", reservation_id="3RK9T2"),
        A("I couldn't find a reservation with the ID 3RK9T2. Could you double-check it?"),
        U("It's definitely 3RK9T2. Change Mei Lee to Mei Garcia."),
        A("I'm sorry, that reservation doesn't exist in our system. Could you check your confirmation email?"),
        U("I don't have time for this. ###STOP###"),
    ],
    note="The simulator gave an id its instructions do not contain (3RK2T9), so the episode stopped testing the agent.",
))
add(Case(
    id="air-43-infrastructure", domain="airline", task="17", split="holdout", expect="failure", cause="infrastructure",
    termination="infrastructure_error", metadata={"infrastructure_error": "MCP server closed the connection"},
    turns=[
        U("For my trip from New York to Chicago: add 3 checked bags, change the passenger to myself and upgrade to economy. I'm "
          "omar_rossi_1241."),
        call("get_user_details", user_id="omar_rossi_1241"),
        C("get_reservation_details", {"reservation_id": "FQ8APE"}, error="Error: connection closed by the MCP server"),
    ],
))
add(Case(
    id="air-44-revised-dob", domain="airline", task="35", split="tune", expect="failure", cause="task_revised",
    task_file="tasks_release_2025-06-10.json",
    turns=[
        U("Hi, I want to book a flight from JFK to SFO on May 24. User id aarav_ahmed_6699."),
        call("get_user_details", user_id="aarav_ahmed_6699"),
        call("search_direct_flight", origin="JFK", destination="SFO", date="2024-05-24"),
        call("search_onestop_flight", origin="JFK", destination="SFO", date="2024-05-24"),
        A("In economy the cheapest option is the direct HAT023 ($163); the second cheapest is HAT069 + HAT258 via Seattle ($290)."),
        U("The second cheapest, in economy. No bags, no insurance. My credit card ending in 7334."),
        A("Booking HAT069 + HAT258 on May 24, economy, for Aarav Ahmed (1981-05-26, from your profile), no bags, no insurance, $290 on "
          "the Mastercard ending in 7334. Confirm? (yes/no)"),
        U("Yes."),
        call("book_reservation", user_id="aarav_ahmed_6699", origin="JFK", destination="SFO", flight_type="one_way", cabin="economy",
             flights=[{"flight_number": "HAT069", "date": "2024-05-24"}, {"flight_number": "HAT258", "date": "2024-05-24"}],
             passengers=[{"first_name": "Aarav", "last_name": "Ahmed", "dob": "1981-05-26"}],
             payment_methods=[{"payment_id": "credit_card_9074831", "amount": 290}], total_baggages=0, nonfree_baggages=0, insurance="no"),
        A("You're booked!"),
        U("Thanks! ###STOP###"),
    ],
    note="The first release's gold books the passenger with a wrong date of birth (1985-04-04); τ³-bench 1.0.0 corrected it to the "
         "profile's 1981-05-26, which is what this run did.",
))
